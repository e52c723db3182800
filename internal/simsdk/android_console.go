package simsdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// `adb emu COMMAND` relays a command to the emulator console and prints its
// answer: payload lines, then "OK" or "KO: reason", every line ending in
// CR LF even on Linux (capture: emulator/adb-emu-avd-name-Pixel_9.bin).
// adb exits 0 whatever the console answered.
//
// "OK: killing emulator, bye bye", "I am alive!" and "virtual device is
// running" are the console's own words; the snapshot KO reasons and the
// snapshot list layout are modelled.
//
// Simulated console commands: kill, ping, help, avd name, avd status,
// avd snapshot list|save|load|delete NAME. Others answer KO.

func consoleReply(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l + "\r\n")
	}
	return b.String()
}

func consoleOK(lines ...string) string { return consoleReply(append(lines, "OK")...) }
func consoleKO(reason string) string   { return consoleReply("KO: " + reason) }

func (s *sdk) adbEmu(ctx context.Context, r *emuRun, words []string) error {
	reply, err := s.console(ctx, r, words)
	if err != nil {
		return err
	}
	_, err = io.WriteString(s.stdout, reply)
	return err
}

func (s *sdk) console(ctx context.Context, r *emuRun, words []string) (string, error) {
	if len(words) == 0 {
		return consoleKO("missing command, try 'help'"), nil
	}
	cmd := strings.ToLower(words[0])
	switch {
	case cmd == "kill":
		return s.consoleKill(r)
	case cmd == "ping":
		return consoleOK("I am alive!"), nil
	case cmd == "help" || cmd == "h" || cmd == "?":
		return consoleOK("Android console commands (simlock simulated SDK):", "",
			"    help|h|?         print a list of commands",
			"    kill             kill the emulator instance",
			"    avd              control virtual device execution",
			"    ping             check if the emulator is alive"), nil
	case cmd == "avd" && len(words) >= 2:
		sub := strings.ToLower(words[1])
		switch {
		case sub == "name" && len(words) == 2:
			return consoleOK(r.AVD), nil
		case sub == "status" && len(words) == 2:
			return consoleOK("virtual device is running"), nil
		case sub == "snapshot" && len(words) >= 3:
			return s.consoleSnapshot(ctx, r, strings.ToLower(words[2]), words[3:])
		}
	}
	return consoleKO("unknown command, try 'help'"), nil
}

// consoleKill asks the emulator process to exit; it answers at once and
// the process ends moments later. shutdown-hang makes the emulator ignore
// the request (it still answers), as a wedged emulator does.
func (s *sdk) consoleKill(r *emuRun) (string, error) {
	if _, fired, err := s.fire(faultShutdownHang); err != nil {
		return "", err
	} else if !fired {
		if err := writeFileAtomic(filepath.Join(s.runDir(r.ConsolePort), killRequestName), []byte("kill\n")); err != nil {
			return "", err
		}
	}
	return consoleReply("OK: killing emulator, bye bye"), nil
}

// consoleSnapshot is "avd snapshot list|save|load|delete [NAME]".
func (s *sdk) consoleSnapshot(ctx context.Context, r *emuRun, op string, args []string) (string, error) {
	if op == "list" {
		return consoleOK(snapshotTable(listSnapshots(r.AVDDir))...), nil
	}
	if len(args) != 1 {
		return consoleKO("bad snapshot command, expected: avd snapshot " + op + " <name>"), nil
	}
	name := args[0]
	if !validSnapshotName(name) {
		return consoleKO(fmt.Sprintf("invalid snapshot name '%s'", name)), nil
	}
	switch op {
	case "save":
		if r.ReadOnly {
			return consoleKO("snapshots cannot be saved by a read-only emulator instance"), nil
		}
		if _, fired, err := s.fire(faultSnapshotFail); err != nil {
			return "", err
		} else if fired {
			return consoleKO(fmt.Sprintf("Failed to save snapshot '%s' %s", name, faultNote(faultSnapshotFail))), nil
		}
		err := s.withDataLock(r.AVDDir, func() error {
			cur := liveRun(s.runDir(r.ConsolePort))
			if cur == nil {
				return errEmulatorGone
			}
			return saveSnapshot(r.AVDDir, cur.DataDir, name, cur.bootLeftAt(s.now()), s.now(), cur.BootID)
		})
		if err != nil {
			return consoleKO(fmt.Sprintf("Failed to save snapshot '%s': %v", name, err)), nil
		}
		return consoleOK(), nil
	case "load":
		return s.consoleLoad(ctx, r, name)
	case "delete":
		if _, ok := readSnapshot(r.AVDDir, name); !ok {
			return consoleKO(fmt.Sprintf("snapshot '%s' does not exist", name)), nil
		}
		err := s.withDataLock(r.AVDDir, func() error { return os.RemoveAll(snapshotDir(r.AVDDir, name)) })
		if err != nil {
			return "", err
		}
		return consoleOK(), nil
	}
	return consoleKO("unknown command, try 'help'"), nil
}

// consoleLoad restores a snapshot into the running emulator: the device is
// offline for the measured restore time, then back with the snapshot's
// data, booted if the snapshot was. The console answers when it is done.
func (s *sdk) consoleLoad(ctx context.Context, r *emuRun, name string) (string, error) {
	meta, ok := readSnapshot(r.AVDDir, name)
	if !ok {
		return consoleKO(fmt.Sprintf("snapshot '%s' does not exist", name)), nil
	}
	if _, fired, err := s.fire(faultSnapshotFail); err != nil {
		return "", err
	} else if fired {
		return consoleKO(fmt.Sprintf("Failed to load snapshot '%s' %s", name, faultNote(faultSnapshotFail))), nil
	}
	var until time.Time
	err := s.withDataLock(r.AVDDir, func() error {
		err := s.updateRun(r.ConsolePort, func(cur *emuRun) error {
			until = s.now().UTC().Add(s.scaled(androidSnapshotRestoreTime))
			cur.RestoringUntil = &until
			online := until
			cur.OnlineAt = &online
			cur.BootedAt = nil
			cur.BootID = snapshotBootID(meta)
			// A snapshot does not record the screen; the guest comes
			// back awake and unlocked, as every baseline was taken.
			cur.ScreenOff, cur.Keyguard = false, false
			if meta.BootLeft >= 0 {
				booted := until.Add(meta.BootLeft)
				cur.BootedAt = &booted
			}
			return nil
		})
		if err != nil {
			return err
		}
		return loadSnapshot(r.AVDDir, r.DataDir, name)
	})
	if errors.Is(err, errEmulatorGone) {
		return "", adbError(fmt.Sprintf("adb: device '%s' not found\n", r.serial()))
	}
	if err != nil {
		return consoleKO(fmt.Sprintf("Failed to load snapshot '%s': %v", name, err)), nil
	}
	if err := sleepCtx(ctx, time.Until(until)); err != nil {
		return "", err
	}
	return consoleOK(), nil
}

// snapshotTable lists snapshots in the layout of QEMU's snapshot listing,
// which the console's "avd snapshot list" follows (not captured).
func snapshotTable(snaps []snapshotMeta) []string {
	lines := []string{"List of snapshots present on all disks:",
		fmt.Sprintf("%-10s%-20s%7s %19s %15s", "ID", "TAG", "VM SIZE", "DATE", "VM CLOCK")}
	for _, m := range snaps {
		lines = append(lines, fmt.Sprintf("%-10s%-20s%7s %19s %15s", "--", m.Name, humanSize(m.Size),
			m.CreatedAt.Local().Format("2006-01-02 15:04:05"), "00:00:00.000"))
	}
	return lines
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
