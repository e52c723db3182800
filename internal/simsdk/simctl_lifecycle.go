package simsdk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Every lifecycle command follows the same shape: decide and record under
// the set lock, do the slow part (the simulated duration) without it, then
// commit under the lock again after re-checking, because another xcrun may
// have acted on the device in between.

// simctl create <name> <device type id|name> [<runtime id|name>]
func (s *sdk) simctlCreate(ctx context.Context, ds deviceSet, args []string) error {
	_, pos := splitFlags(args)
	if len(pos) < 2 || len(pos) > 3 {
		return usageErr("create <name> <device type id> [<runtime id>]")
	}
	name := pos[0]
	dt, ok := findDeviceType(pos[1])
	if !ok {
		return errInvalidDeviceType(pos[1])
	}
	rts, err := s.installedRuntimes()
	if err != nil {
		return err
	}
	var rt simRuntime
	if len(pos) == 3 {
		if rt, ok = findRuntime(rts, pos[2]); !ok {
			return errInvalidRuntime(pos[2])
		}
	} else if rt, ok = newestRuntimeFor(rts, dt); !ok {
		return errInvalidRuntime("(none installed supports " + dt.Name + ")")
	}
	if !rt.supports(dt) {
		return errUnsupportedCombination(dt, rt)
	}
	if _, fired, err := s.fire(faultCreateFail); err != nil {
		return err
	} else if fired {
		return domainErr("NSPOSIXErrorDomain", 28, 28,
			"Unable to create a device: No space left on device "+faultNote(faultCreateFail))
	}

	udid, err := newUDID()
	if err != nil {
		return err
	}
	d := &iosDevice{
		UDID:         udid,
		Name:         name,
		DeviceType:   dt.Identifier,
		Runtime:      rt.Identifier,
		CreatedAt:    s.now().UTC(),
		Creating:     true,
		DataPathSize: freshDataSize,
	}
	if err := s.withSetLock(ds, func() error { return ds.save(d) }); err != nil {
		return err
	}
	if err := sleepCtx(ctx, s.scaled(iosCreateTime)); err != nil {
		_ = s.withSetLock(ds, func() error { return os.RemoveAll(ds.deviceDir(udid)) })
		return err
	}
	err = s.withSetLock(ds, func() error {
		if err := os.MkdirAll(ds.dataPath(udid), dirMode); err != nil {
			return err
		}
		d.Creating = false
		return ds.save(d)
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(s.stdout, udid)
	return err
}

func (s *sdk) withSetLock(ds deviceSet, fn func() error) error {
	l, err := ds.lock()
	if err != nil {
		return err
	}
	defer l.Unlock()
	return fn()
}

// simctl boot <device> [--arch=...] [--disabledJob=...]: starts the boot
// and returns at once; the device is Booting for the boot duration.
func (s *sdk) simctlBoot(ctx context.Context, ds deviceSet, args []string) error {
	_, pos := splitFlags(args)
	if len(pos) != 1 {
		return usageErr("boot <device> [--arch=<arch>] [--disabledJob=<job>] [--enabledJob=<job>]")
	}
	d, err := s.resolveDevice(ds, pos[0])
	var te *toolError
	if errors.As(err, &te) && strings.HasPrefix(te.text, "Invalid device: ") {
		return errInvalidDeviceOrPair(pos[0])
	}
	if err != nil {
		return err
	}
	return s.bootDevice(ctx, ds, d.UDID)
}

// bootDevice boots a shut-down device: it starts the device process and
// records it, under the set lock. A boot-fail fault instead spends the time
// launchd_sim takes to give up (outside the lock) and fails.
func (s *sdk) bootDevice(ctx context.Context, ds deviceSet, udid string) error {
	failed := false
	err := s.withSetLock(ds, func() error {
		d, err := ds.load(udid)
		if err != nil {
			if isNotExist(err) {
				return errInvalidDevice(udid)
			}
			return err
		}
		if st := ds.state(d, s.now()); st != stateShutdown {
			return stateErr("boot device", st)
		}
		rts, err := s.installedRuntimes()
		if err != nil {
			return err
		}
		if _, ok := runtimeByID(rts, d.Runtime); !ok {
			return simErr(405, "Unable to boot device because we cannot determine the runtime bundle.")
		}
		if _, failed, err = s.fire(faultBootFail); err != nil || failed {
			return err
		}
		return s.startDevice(ds, d)
	})
	if err != nil || !failed {
		return err
	}
	if err := sleepCtx(ctx, s.scaled(iosBootFailTime)); err != nil {
		return err
	}
	return domainErr("NSPOSIXErrorDomain", 60, 60,
		"Unable to boot the Simulator.",
		"launchd failed to respond.",
		"Underlying error (domain=com.apple.SimLaunchHostService.RequestError, code=4):",
		"\tFailed to start launchd_sim: could not bind to session, launchd_sim may have crashed or quit responding "+faultNote(faultBootFail))
}

// startDevice spawns d's process and records it; the caller holds the set
// lock. The boot-hang and crash-after faults shape the process here.
func (s *sdk) startDevice(ds deviceSet, d *iosDevice) error {
	_, hang, err := s.fire(faultBootHang)
	if err != nil {
		return err
	}
	crashAfter := time.Duration(-1)
	if f, fired, err := s.fire(faultCrashAfter); err != nil {
		return err
	} else if fired {
		ms, _ := strconv.Atoi(f.Value) // validated when parsed
		crashAfter = time.Duration(ms) * time.Millisecond
	}
	bootTime := s.scaled(bootDuration(d))
	spawnBoot := bootTime
	if hang {
		spawnBoot = -1
	}
	dir := ds.deviceDir(d.UDID)
	pid, err := s.spawnDevice(deviceSpawn{
		Platform:   "ios",
		ID:         d.UDID,
		Name:       d.Name,
		Dir:        dir,
		BootTime:   spawnBoot,
		CrashAfter: crashAfter,
	})
	if err != nil {
		return err
	}
	started := s.now().UTC()
	d.clearProcess()
	d.PID = pid
	d.BootStartedAt = &started
	if !hang {
		ready := started.Add(bootTime)
		d.BootReadyAt = &ready
	}
	d.LastBootedAt = &started
	d.DataPathSize = max(d.DataPathSize, bootedDataSize)
	if err := ds.save(d); err != nil {
		_ = stopDevice(context.Background(), pid, dir, 0, true)
		s.unregisterProc("ios", d.UDID)
		return err
	}
	return nil
}

// bootDuration is how long d takes to boot: the full first boot unless
// it already has first-boot data (it booted before, or it is a clone of a
// device that had). An erase clears LastBootedAt and with it that data.
func bootDuration(d *iosDevice) time.Duration {
	if d.LastBootedAt == nil {
		return iosFirstBootTime
	}
	return iosRebootTime
}

// simctl bootstatus <device> [-b] [-d] [-c]: waits until the device has
// booted, printing a status block every second meanwhile; -b boots it
// first if it is shut down.
func (s *sdk) simctlBootstatus(ctx context.Context, ds deviceSet, args []string) error {
	flags, pos := splitFlags(args)
	if len(pos) != 1 {
		return usageErr("bootstatus <device> [-bcd]")
	}
	d, err := s.resolveDevice(ds, pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "Monitoring boot status for %s (%s).\n", d.Name, d.UDID)
	st := ds.state(d, s.now())
	if st == stateBooted {
		fmt.Fprintln(s.stdout, "Device already booted, nothing to do.")
		return nil
	}
	sawBoot := false
	if st == stateShutdown && flags["-b"] {
		// Having booted it ourselves, a Shutdown seen from now on means the
		// device went away, even if it died before the first poll saw it
		// Booting (a crash soon after the start, on a loaded machine).
		err := s.bootDevice(ctx, ds, d.UDID)
		sawBoot = err == nil
		if err != nil {
			// Someone else may have started it meanwhile; that is fine.
			var te *toolError
			if cur, lerr := ds.load(d.UDID); !errors.As(err, &te) || lerr != nil ||
				ds.state(cur, s.now()) == stateShutdown {
				return err
			}
		}
	}
	var lastBlock time.Time
	for {
		cur, err := ds.load(d.UDID)
		if err != nil {
			if isNotExist(err) {
				return errInvalidDevice(d.UDID)
			}
			return err
		}
		now := s.now()
		switch st := ds.state(cur, now); st {
		case stateBooted:
			return nil
		case stateBooting:
			sawBoot = true
			if lastBlock.IsZero() || now.Sub(lastBlock) >= statusInterval {
				lastBlock = now
				s.printBootStatus(cur, now)
			}
		case stateShutdown, stateShuttingDown:
			if sawBoot {
				// The device went away while we waited (crash or shutdown).
				return stateErr("lookup", st)
			}
		}
		if err := sleepCtx(ctx, pollInterval); err != nil {
			return err
		}
	}
}

// printBootStatus prints one progress block in the captured Xcode 12+
// format; the phase follows how far the simulated boot has come.
func (s *sdk) printBootStatus(d *iosDevice, now time.Time) {
	started := now
	if d.BootStartedAt != nil {
		started = *d.BootStartedAt
	}
	elapsed := now.Sub(started)
	phase, status := "Data Migration", 2
	if d.BootReadyAt != nil {
		total := d.BootReadyAt.Sub(started)
		switch {
		case total > 0 && elapsed < total/5:
			phase, status = "BackBoard", 1
		case total > 0 && elapsed >= total*4/5:
			phase, status = "System App", 3
		}
	}
	secs := int(elapsed / time.Second)
	fmt.Fprintf(s.stdout, "[%s] Status=%d, isTerminal=NO, Elapsed=%02d:%02d.\n\tWaiting on %s\n\n",
		now.UTC().Format("2006-01-02 15:04:05 +0000"), status, secs/60, secs%60, phase)
}

// simctl shutdown <device>|all
func (s *sdk) simctlShutdown(ctx context.Context, ds deviceSet, args []string) error {
	_, pos := splitFlags(args)
	if len(pos) != 1 {
		return usageErr("shutdown <device> | all")
	}
	if pos[0] == "all" {
		devs, err := ds.loadAll()
		if err != nil {
			return err
		}
		var targets []string
		now := s.now()
		for _, d := range devs {
			switch ds.state(d, now) {
			case stateBooting, stateBooted, stateShuttingDown:
				targets = append(targets, d.UDID)
			}
		}
		return s.forEachParallel(targets, func(udid string) error { return s.shutdownDevice(ctx, ds, udid) })
	}
	d, err := s.resolveDevice(ds, pos[0])
	if err != nil {
		return err
	}
	return s.shutdownDevice(ctx, ds, d.UDID)
}

func (s *sdk) forEachParallel(ids []string, fn func(string) error) error {
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { errs[i] = fn(id) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the first failure decides the exit status
		}
	}
	return nil
}

func (s *sdk) shutdownDevice(ctx context.Context, ds deviceSet, udid string) error {
	var pid int
	err := s.withSetLock(ds, func() error {
		d, err := ds.load(udid)
		if err != nil {
			if isNotExist(err) {
				return errInvalidDevice(udid)
			}
			return err
		}
		now := s.now()
		switch st := ds.state(d, now); st {
		case stateShutdown, stateCreating:
			if st == stateShutdown && d.PID != 0 { // crashed: tidy the record
				d.clearProcess()
				_ = ds.save(d)
				s.unregisterProc("ios", udid)
			}
			return stateErr("shutdown device", st)
		}
		if d.ShutdownStartedAt == nil {
			t := now.UTC()
			d.ShutdownStartedAt = &t
			if err := ds.save(d); err != nil {
				return err
			}
		}
		pid = d.PID
		return nil
	})
	if err != nil {
		return err
	}
	if _, fired, err := s.fire(faultShutdownHang); err != nil {
		return err
	} else if fired {
		<-ctx.Done() // stuck "Shutting Down" until the caller gives up
		return ctx.Err()
	}
	// The device reads "Shutting Down" for the shutdown time, then its
	// process is told to go.
	if err := sleepCtx(ctx, s.scaled(iosShutdownTime)); err != nil {
		return err
	}
	if err := stopDevice(ctx, pid, ds.deviceDir(udid), killGrace, false); err != nil {
		return err
	}
	return s.withSetLock(ds, func() error {
		d, err := ds.load(udid)
		if err != nil {
			return nil // deleted meanwhile: nothing left to record
		}
		if d.PID == pid {
			d.clearProcess()
			if err := ds.save(d); err != nil {
				return err
			}
			s.unregisterProc("ios", udid)
		}
		return nil
	})
}

// simctl erase <device>|all: only a shut-down device can be erased.
func (s *sdk) simctlErase(ctx context.Context, ds deviceSet, args []string) error {
	_, pos := splitFlags(args)
	if len(pos) != 1 {
		return usageErr("erase <device> | all")
	}
	if pos[0] == "all" {
		devs, err := ds.loadAll()
		if err != nil {
			return err
		}
		ids := make([]string, len(devs))
		for i, d := range devs {
			ids[i] = d.UDID
		}
		return s.forEachParallel(ids, func(udid string) error { return s.eraseDevice(ctx, ds, udid) })
	}
	d, err := s.resolveDevice(ds, pos[0])
	if err != nil {
		return err
	}
	return s.eraseDevice(ctx, ds, d.UDID)
}

func (s *sdk) eraseDevice(ctx context.Context, ds deviceSet, udid string) error {
	check := func() (*iosDevice, error) {
		d, err := ds.load(udid)
		if err != nil {
			if isNotExist(err) {
				return nil, errInvalidDevice(udid)
			}
			return nil, err
		}
		if st := ds.state(d, s.now()); st != stateShutdown {
			return nil, stateErr("erase contents and settings", st)
		}
		return d, nil
	}
	if err := s.withSetLock(ds, func() error { _, err := check(); return err }); err != nil {
		return err
	}
	if _, fired, err := s.fire(faultEraseFail); err != nil {
		return err
	} else if fired {
		return domainErr("NSPOSIXErrorDomain", 16, 16,
			"Unable to erase contents and settings: Resource busy "+faultNote(faultEraseFail))
	}
	if err := sleepCtx(ctx, s.scaled(iosEraseTime)); err != nil {
		return err
	}
	return s.withSetLock(ds, func() error {
		d, err := check()
		if err != nil {
			return err
		}
		for _, p := range []string{ds.dataPath(udid), ds.logPath(udid)} {
			if err := os.RemoveAll(p); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(ds.dataPath(udid), dirMode); err != nil {
			return err
		}
		if d.PID != 0 {
			d.clearProcess()
			s.unregisterProc("ios", udid)
		}
		// An erased device is as good as new: never booted, no logs.
		d.DataPathSize = freshDataSize
		d.LastBootedAt = nil
		d.Apps = nil
		return ds.save(d)
	})
}

// simctl delete <device>...|all|unavailable. A running device is stopped
// first; that is quick (SIGKILL), so it happens under the set lock.
func (s *sdk) simctlDelete(ctx context.Context, ds deviceSet, args []string) error {
	_, pos := splitFlags(args)
	if len(pos) == 0 {
		return usageErr("delete <device> [... <device>] | unavailable | all")
	}
	var ids []string
	switch {
	case len(pos) == 1 && (pos[0] == "all" || pos[0] == "unavailable"):
		devs, err := ds.loadAll()
		if err != nil {
			return err
		}
		rts, err := s.installedRuntimes()
		if err != nil {
			return err
		}
		for _, d := range devs {
			if _, ok := runtimeByID(rts, d.Runtime); pos[0] == "all" || !ok {
				ids = append(ids, d.UDID)
			}
		}
	default:
		for _, ref := range pos {
			d, err := s.resolveDevice(ds, ref)
			if err != nil {
				return err
			}
			ids = append(ids, d.UDID)
		}
	}
	return s.withSetLock(ds, func() error {
		for _, udid := range ids {
			d, err := ds.load(udid)
			if err != nil {
				continue // already gone
			}
			if ds.alive(d) {
				if err := stopDevice(ctx, d.PID, ds.deviceDir(udid), 0, true); err != nil {
					return err
				}
			}
			if err := os.RemoveAll(ds.deviceDir(udid)); err != nil {
				return err
			}
			s.unregisterProc("ios", udid)
		}
		return nil
	})
}

// simctl rename <device> <new name>
func (s *sdk) simctlRename(ds deviceSet, args []string) error {
	_, pos := splitFlags(args)
	if len(pos) != 2 {
		return usageErr("rename <device> <new name>")
	}
	d, err := s.resolveDevice(ds, pos[0])
	if err != nil {
		return err
	}
	return s.withSetLock(ds, func() error {
		cur, err := ds.load(d.UDID)
		if err != nil {
			return errInvalidDevice(pos[0])
		}
		cur.Name = pos[1]
		return ds.save(cur)
	})
}
