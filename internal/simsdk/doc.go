// Package simsdk is the simulated SDK: a stand-in for Xcode's simulator
// tools and the Android SDK tools that lets simlock's real drivers run on
// machines without a Mac or an Android SDK.
//
// The simlock binary becomes a tool when it runs under the tool's name
// (Install makes the links; the CLI calls Main). It then takes the same
// arguments as the real tool and answers with the same output formats, error
// texts and exit statuses as the captures in the project's fixture library
// (simctl JSON in the Xcode 16 shape, text lists, CoreSimulator errors such
// as code 405 / exit 149, avdmanager and sdkmanager tables, adb's device
// list, the emulator console's CR LF replies). State lives on disk under the
// SDK home, guarded by flock, so any number of tool processes can run at
// once.
//
// # Simulated tools: Xcode
//
//   - xcrun --version (says "simulated"), xcrun --find simctl|xcodebuild,
//     xcrun simctl ..., xcrun xcodebuild ...
//   - simctl [--set <dir>] list [devices|devicetypes|runtimes|pairs]
//     [-j] [-e] [<term>|available]; create; boot; bootstatus [-b];
//     shutdown <dev>|all; erase <dev>|all; delete <dev>...|all|unavailable;
//     clone <dev> <name> [<destination set>]; rename; install; uninstall; launch; terminate; spawn <dev> launchctl
//     print system/LABEL | print-disabled system | disable|enable|bootout
//     system/LABEL | bootstrap system PLIST (per-device overrides and loaded
//     jobs in the device's data directory, so erase clears them; optional
//     jobs per runtime in ios_resources.go, with the idle footprint they
//     cost). A device may be named by UDID, by a unique name, or as
//     "booted".
//     rename; install; uninstall; launch; terminate; getenv; openurl;
//     listapps; get_app_container [app|data|groups]; spawn (launchctl,
//     sw_vers, notifyutil -p, defaults read|write|delete, log show|stream).
//     A device may be named by UDID, by a unique name, or as "booted". Each
//     subcommand refuses an option it does not take with its usage (exit
//     64); boot of an unknown device says "Invalid device or device pair".
//     A device remembers its apps (installed, running: launch sets it,
//     terminate and a shutdown clear it; terminate of an app that does not
//     run fails with code 164 "found nothing to terminate") and the URLs
//     openurl delivered (OpenedURLs).
//   - xcrun [--sdk NAME[VERSION]] --show-sdk-version|--show-sdk-path|
//     --show-sdk-platform-path|--show-sdk-platform-version (every SDK of
//     the simulated Xcode has its version; macosx is the default).
//   - xcodebuild -version; xcodebuild -downloadPlatform iOS [-buildVersion V]
//   - xcodebuild -showdestinations -scheme S; xcodebuild test|build -scheme S
//     -destination SPEC (-project/-workspace or a project in the working
//     directory): destinations from the default device set only
//     (ios_xcodebuild.go)
//     installs a runtime after the measured download time. Without
//     -buildVersion it installs this Xcode's own iOS runtime if missing,
//     otherwise the newest downloadable one (iOS 26.5, then 18.4).
//
// The catalog is a simulated Xcode 26.3: the device types of a real Xcode
// 16.0 capture, runtimes iOS 17.5, 18.0, 26.3 and visionOS 1.2 installed,
// iOS 18.4 and 26.5 downloadable (catalog/PROVENANCE.md says where each
// comes from).
//
// # Simulated tools: Android
//
//   - avdmanager list avd [-c]; list device [-c]; create avd -n NAME
//     -k PACKAGE [-d PROFILE|INDEX] [-f] [-c SDCARD] [-b [TAG/]ABI] [-g TAG]
//     [-p PATH] (asks "Do you wish to create a custom hardware profile? [no]"
//     on stdin, and fails like the real one when stdin is closed);
//     delete avd -n NAME. Progress on stdout, "Error: ..." plus "null" on
//     stderr.
//   - sdkmanager --list_installed; --list; [--install] PACKAGE...;
//     --uninstall PACKAGE...; --version; --licenses (all accepted);
//     --sdk_root=, --channel= and the proxy options are accepted and ignored.
//   - emulator -list-avds (only the names, one a line, as emulator 36.x
//     prints them); -version; -help; -accel-check;
//     emulator -avd NAME|@NAME [-port N] [-no-window] [-no-audio]
//     [-no-boot-anim] [-no-snapshot-save] [-no-snapshot-load] [-no-snapshot]
//     [-snapshot NAME] [-wipe-data] [-read-only] [-delay-adb] [-prop K=V]
//     (hardware options are accepted and ignored). It runs in the foreground
//     and is itself the device: it ends on `adb emu kill`, SIGTERM or
//     SIGINT (saving the quickboot snapshot unless told not to), and a kill
//     -9 is a crash.
//   - adb [-s SERIAL] [-t ID] [-P PORT] [-e] [-d] (ANDROID_SERIAL and
//     ANDROID_ADB_SERVER_PORT honoured): version (says "simulated"),
//     devices [-l], wait-for[-TRANSPORT]-STATE, get-state, get-serialno,
//     start-server, kill-server, shell [CMD...] (a small sh: echo, cat, rm,
//     mkdir, touch, ls, grep, getprop, setprop, pm, id, sleep, sh -c,
//     settings, cmd role|activity, bmgr, dumpsys package, dumpsys window
//     [policy|displays], wm dismiss-keyguard, with quoting,
//     redirections, ; && || |; cat of the boot id and /proc/meminfo), emu (kill, ping, avd name|status,
//     avd snapshot list|save|load|delete NAME), install, uninstall, push,
//     pull, root, unroot.
//     start-server, kill-server, shell [-e C|-n|-T|-t|-x] [CMD...] (a small
//     sh: echo, cat, rm, mkdir, touch, ls, grep, getprop, setprop, pm, am,
//     cmd package, pidof, input, id, sleep, sh -c, with quoting,
//     redirections, ; && || |), exec-out CMD (raw: stderr in the same
//     stream, adb exits 0), emu (kill, ping, avd name|status, avd snapshot
//     list|save|load|delete NAME), install, uninstall, push, pull, root,
//     unroot.
//   - The app commands (android_am.go, android_input.go): am start|
//     start-activity [-W] [-n CMP|-a ACT -c CAT -p PKG -d URI ...], am
//     force-stop|kill PKG, am broadcast; pm list packages [-3 -s -f -U
//     --show-versioncode] [FILTER], pm list features, pm path|install|
//     uninstall|clear; cmd package query-activities|resolve-activity
//     [--brief] INTENT, cmd package has-feature F (and cmd package list|
//     path|install|uninstall, which is pm); input's real argument forms
//     (text, keyevent, tap, swipe, draganddrop, press, roll, motionevent,
//     keycombination, scroll), checked and without effect but for the
//     screen keys (POWER, SLEEP, WAKEUP, MENU), which turn the screen off
//     and on and show or dismiss its lock screen as `dumpsys window`
//     reports it (android_window.go). An installed
//     APK's package is the one its binary manifest names (else the file
//     name without ".apk"), its launcher activity <package>/.MainActivity;
//     adb
//     install and pm install fill the same package list; the run remembers
//     which apps am started (pidof finds them) until force-stop, uninstall
//     or the emulator's exit. Unknown options fail as the device's shell
//     commands do (Java exceptions exit 255).
//
// Each adb server port is its own server. An emulator really binds its
// console port and the adb port after it on 127.0.0.1 (a launch whose
// ports are taken fails as the real one does), and announces itself to the
// server of the ANDROID_ADB_SERVER_PORT it was started with if that server
// runs. A server scans consoles 5554–5584 and attaches the simulated
// host's USB and mDNS devices (SetAndroidHostDevices) unless the client
// that started it set ADB_EMU=0, ADB_USB=0 or ADB_MDNS=0 (or a low
// ADB_LOCAL_TRANSPORT_MAX_PORT, an auto-connect list without
// adb-tls-connect), as AOSP adb does. Until adbd answers (a third of the
// boot) the emulator is "offline"; sys.boot_completed becomes 1, and
// init.svc.bootanim "stopped" (unset under -no-boot-anim), when the boot
// completes.
//
// The emulator also serves adb's transport protocol on its adb port
// (adbd*.go) and its console on its console port behind the auth token in
// $HOME (android_console_tcp.go), and announces itself over TCP to a real
// adb server on its ANDROID_ADB_SERVER_PORT, so a real adb works against
// it as server and client; adbd answers from the same device shell and
// data partition as the simulated adb (ADR 0099).
//
// The catalog is a simulated cmdline-tools 19.0 / platform-tools 36.0.0 /
// emulator 36.1.9 SDK: android-35 and android-36 Google APIs and Google Play
// images installed for the host ABI (x86_64 on amd64, arm64-v8a on arm64),
// android-34 and the other ABI downloadable, plus the android-36 16 KB
// page-size previews; the hardware profiles of avdmanager (pixel_6 … pixel_9,
// medium_phone, small_phone, pixel_tablet, ...). AVDs live in
// $ANDROID_AVD_HOME, else $ANDROID_USER_HOME/avd, else <home>/android/avd
// (never the user's real ~/.android). An AVD's data partition is the
// directory <name>.avd/userdata, which is /data in `adb shell`; snapshots
// are copies of it.
//
// Texts no capture shows are modelled on the real tools' sources and public
// transcripts; android_*.go marks them where they are produced.
//
// # Devices and processes
//
// A device set is a directory with one subdirectory per UDID holding
// device.json, data/ and logs/; --set names it (created if missing),
// otherwise it is <home>/devices. Runtimes and device types are global.
//
// A booted device is a real process: simlock's hidden DeviceCommand
// (DeviceProcessMain), started detached by boot. It holds a lock on
// <device>/proc.lock for its whole life, and a device whose process is gone,
// however it went, lists as Shutdown. An Android emulator is the `emulator`
// process itself, holding <home>/android/emulators/<port>/proc.lock the same
// way. PS and Reset find these processes through <home>/procs (Platform
// "ios" with the UDID, or "android" with the emulator's serial).
//
// # Environment
//
//	SIMLOCK_SIMSDK_HOME          state directory (default ~/.simlock-simsdk)
//	SIMLOCK_SIMSDK_SPEED         factor on the modelled durations (default 1,
//	                             0 = instant), see the timing table below;
//	                             Android cold boot 30 s (adbd after
//	                             10 s), snapshot restore 3.7 s, avdmanager
//	                             create 2 s, package download 60 s
//	SIMLOCK_SIMSDK_FAULTS        injected faults, see below
//	SIMLOCK_SIMSDK_COMMAND_LOG   a file each tool invocation appends one
//	                             line to ("tool arg..."), for tests that
//	                             prove which commands a process ran
//	SIMLOCK_SIMSDK_IOS_RUNTIMES  which runtimes count as preinstalled: a comma
//	                             list of identifiers, names or versions, or
//	                             "none" for a fresh Xcode without runtimes
//	SIMLOCK_SIMSDK_ANDROID_LICENSES  "unaccepted": sdkmanager --install of a
//	                             missing package prompts for the licence on
//	                             stdin (see android_sdkmanager.go)
//
// An invalid SPEED or FAULTS value makes every tool fail with exit status 2,
// so a typo cannot silently change what a test exercises.
//
// # iOS timing model
//
// What one simctl step costs at speed 1, and where the figure comes from.
// A device has first-boot data once it has started a boot; erase removes
// it, clone copies it (the clone of a device that booted once skips the
// long first boot, which is what makes clone provisioning pay).
//
//	create            0.4 s   sub-second in every capture
//	first boot        30 s    after create or erase: the top of the
//	                          20-30 s published for create + boot; the
//	                          session-broker reference measured 52 s for
//	                          the boot after an erase on its (loaded) Mac,
//	                          so 30 s flatters the erase reset if anything
//	boot (booted once) 1.5 s  with clone 0.5 s this gives the ~2 s
//	                          published for clone + boot of a device that
//	                          has booted once (APFS copy-on-write)
//	clone             0.5 s   see above; the source must be shut down
//	erase             0.3 s   the session-broker reference's measurement
//	shutdown          1.5 s   measured; the reference saw ~15 s "stopping"
//	                          including its own drain
//	runtime download  60 s    scaled down from real multi-GB downloads
//
// Hence on the modelled timings create + first boot is 30.4 s, clone +
// boot 2 s (1/15 of it), and an erase reset (shutdown, erase, first boot)
// 31.8 s against 3.5 s for a clone reset (shutdown 1.5 s, delete, which
// costs nothing here, clone 0.5 s, boot 1.5 s).
//
// # Faults
//
// SIMLOCK_SIMSDK_FAULTS is a comma list of name[=value][@count]. Without
// @count a fault fires every time; with it, it fires count times in total
// across all processes sharing the home (Reset forgets the counts).
//
//	boot-fail       iOS: simctl boot (and bootstatus -b) fails like a
//	                launchd_sim that never answered (NSPOSIXErrorDomain code
//	                60, exit 60) after the scaled 5 s it takes to give up.
//	                Android: the emulator stays offline and exits 1 after the
//	                scaled 5 s.
//	boot-hang       iOS: boot starts the device but it never leaves Booting;
//	                bootstatus reports "Waiting on Data Migration" forever.
//	                Android: adbd answers (state "device") but
//	                sys.boot_completed never becomes 1.
//	crash-after=MS  the device process (iOS) or the emulator process
//	                (Android) exits with status 134 MS milliseconds (not
//	                scaled) after it started; the device is then Shutdown /
//	                gone from adb
//	erase-fail      iOS only: simctl erase fails (exit 16)
//	create-fail     iOS: simctl create fails (exit 28). Android: avdmanager
//	                create avd fails after its prompt (exit 1)
//	install-fail    iOS: xcodebuild -downloadPlatform fails half way (exit
//	                70), and simctl install fails (exit 1). Android:
//	                sdkmanager --install fails half way (exit 1), and adb
//	                install fails with INSTALL_FAILED_INSUFFICIENT_STORAGE
//	install-noop    iOS and Android: the download runs and the installer
//	                (xcodebuild -downloadPlatform, sdkmanager --install)
//	                exits 0, but nothing is installed: a lying installer
//	shutdown-hang   iOS: simctl shutdown never returns; the device stays
//	                "Shutting Down" until another shutdown (or delete) ends
//	                it. Android: `adb emu kill` is answered but ignored; a
//	                signal still ends the emulator
//	snapshot-fail   Android only: `adb emu avd snapshot save|load` answers
//	                KO, and an emulator told to boot from a snapshot
//	                (-snapshot NAME, or the quickboot one) cold-boots instead
//	role-unavailable Android only: `adb shell cmd role ...` fails with
//	                "cmd: Can't find service: role" (exit 20), as on an image
//	                whose role service cannot be reached
//	slow-probe=MS   iOS and Android: the inventory probes (`simctl list
//	                devices`, `adb devices`, `emulator -list-avds`) answer
//	                MS milliseconds (not scaled) late, for the inventory
//	                budgets (docs/adr/0039)
//	window-dump-slow=MS  Android only: `adb shell dumpsys window`, the
//	                live-state probe, answers MS milliseconds (not scaled)
//	                late, for the probe's bound (docs/adr/0090)
//	launchctl-missing=LABEL  iOS: the booted runtime does not ship the
//	                launchd job LABEL (print finds no service, bootstrap
//	                finds no file); may be given more than once
//	launchctl-write-noop  iOS: launchctl disable, enable, bootout and
//	                bootstrap exit 0 but change nothing: a write that does
//	                not stick
//	launchctl-slow=MS  iOS: every launchctl print and print-disabled waits
//	                MS milliseconds (not scaled) before answering
//
// Output of an injected failure carries "(simlock simulated fault NAME)".
package simsdk
