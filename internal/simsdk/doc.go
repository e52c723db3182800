// Package simsdk is the simulated SDK: a stand-in for Xcode's simulator
// tools (and, later, the Android SDK tools) that lets simlock's real drivers
// run on machines without a Mac or an Android SDK.
//
// The simlock binary becomes a tool when it runs under the tool's name
// (Install makes the links; the CLI calls Main). It then takes the same
// arguments as the real tool and answers with the same output formats, error
// texts and exit statuses as the captures in the project's fixture library
// (simctl JSON in the Xcode 16 shape, text lists, CoreSimulator errors such
// as code 405 / exit 149). State lives on disk under the SDK home, guarded by
// flock, so any number of tool processes can run at once.
//
// # Simulated tools
//
//   - xcrun --version (says "simulated"), xcrun --find simctl|xcodebuild,
//     xcrun simctl ..., xcrun xcodebuild ...
//   - simctl [--set <dir>] list [devices|devicetypes|runtimes|pairs]
//     [-j] [-e] [<term>|available]; create; boot; bootstatus [-b];
//     shutdown <dev>|all; erase <dev>|all; delete <dev>...|all|unavailable;
//     rename; install; uninstall; launch; terminate. A device may be named by
//     UDID, by a unique name, or as "booted".
//   - xcodebuild -version; xcodebuild -downloadPlatform iOS [-buildVersion V]
//     installs a runtime after the measured download time. Without
//     -buildVersion it installs this Xcode's own iOS runtime if missing,
//     otherwise the newest downloadable one (iOS 26.5, then 18.4).
//   - adb, emulator, avdmanager, sdkmanager: not simulated yet (exit 1).
//
// The catalog is a simulated Xcode 26.3: the device types of a real Xcode
// 16.0 capture, runtimes iOS 17.5, 18.0, 26.3 and visionOS 1.2 installed,
// iOS 18.4 and 26.5 downloadable (catalog/PROVENANCE.md says where each
// comes from).
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
// however it went, lists as Shutdown. PS and Reset find these processes
// through <home>/procs.
//
// # Environment
//
//	SIMLOCK_SIMSDK_HOME          state directory (default ~/.simlock-simsdk)
//	SIMLOCK_SIMSDK_SPEED         factor on the measured durations (default 1,
//	                             0 = instant): boot 30 s, shutdown 1.5 s,
//	                             erase 0.7 s, create 0.4 s, runtime download 60 s
//	SIMLOCK_SIMSDK_FAULTS        injected faults, see below
//	SIMLOCK_SIMSDK_IOS_RUNTIMES  which runtimes count as preinstalled: a comma
//	                             list of identifiers, names or versions, or
//	                             "none" for a fresh Xcode without runtimes
//
// An invalid SPEED or FAULTS value makes every tool fail with exit status 2,
// so a typo cannot silently change what a test exercises.
//
// # Faults
//
// SIMLOCK_SIMSDK_FAULTS is a comma list of name[=value][@count]. Without
// @count a fault fires every time; with it, it fires count times in total
// across all processes sharing the home (Reset forgets the counts).
//
//	boot-fail       simctl boot (and bootstatus -b) fails like a launchd_sim
//	                that never answered (NSPOSIXErrorDomain code 60, exit 60)
//	                after the scaled 5 s it takes to give up
//	boot-hang       boot starts the device but it never leaves Booting;
//	                bootstatus reports "Waiting on Data Migration" forever
//	crash-after=MS  the device process exits MS milliseconds (not scaled)
//	                after boot, so the device lists as Shutdown from then on
//	erase-fail      simctl erase fails (exit 16)
//	create-fail     simctl create fails (exit 28)
//	install-fail    xcodebuild -downloadPlatform fails half way (exit 70), and
//	                simctl install fails (exit 1)
//	shutdown-hang   simctl shutdown never returns; the device stays
//	                "Shutting Down" until another shutdown (or delete) ends it
//
// Output of an injected failure carries "(simlock simulated fault NAME)".
package simsdk
