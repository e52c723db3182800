package simsdk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// simctl clone <device> <new name> [<destination device set path>]
//
// The real command copies the device directory (copy-on-write on APFS), so
// the clone has the source's data: its apps, its launchd overrides and,
// above all, the first-boot data that makes its first boot a short one
// (bootDuration). Like the real one it refuses a source that is not shut
// down. The copy is staged under a hidden name in the destination set and
// renamed into place, so a concurrent list never sees half a device, and
// no two set locks are ever held at once (the source and the destination
// may be the same set).
func (s *sdk) simctlClone(ctx context.Context, ds deviceSet, args []string) error {
	_, pos := splitFlags(args)
	if len(pos) < 2 || len(pos) > 3 {
		return usageErr("clone <device> <new name> [<destination device set path>]")
	}
	src, err := s.resolveDevice(ds, pos[0])
	if err != nil {
		return err
	}
	dest := ds
	if len(pos) == 3 {
		if dest, err = s.openSet(pos[2]); err != nil {
			return err
		}
	}
	shutDown := func() (*iosDevice, error) {
		d, err := ds.load(src.UDID)
		if err != nil {
			if isNotExist(err) {
				return nil, errInvalidDevice(pos[0])
			}
			return nil, err
		}
		if st := ds.state(d, s.now()); st != stateShutdown {
			return nil, stateErr("clone device", st)
		}
		return d, nil
	}
	if err := s.withSetLock(ds, func() error { _, err := shutDown(); return err }); err != nil {
		return err
	}
	if err := sleepCtx(ctx, s.scaled(iosCloneTime)); err != nil {
		return err
	}
	udid, err := newUDID()
	if err != nil {
		return err
	}
	staging := filepath.Join(dest.dir, ".clone-"+udid)
	var clone *iosDevice
	err = s.withSetLock(ds, func() error {
		// Checked again: the source may have been booted or deleted while
		// the copy was (notionally) running.
		d, err := shutDown()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(staging, dirMode); err != nil {
			return err
		}
		if err := copyTree(ds.dataPath(d.UDID), filepath.Join(staging, "data")); err != nil {
			return err
		}
		clone = &iosDevice{
			UDID:         udid,
			Name:         pos[1],
			DeviceType:   d.DeviceType,
			Runtime:      d.Runtime,
			CreatedAt:    s.now().UTC(),
			LastBootedAt: d.LastBootedAt,
			DataPathSize: d.DataPathSize,
			OpenedURLs:   append([]string(nil), d.OpenedURLs...),
		}
		for _, a := range d.Apps {
			a.Running = false
			clone.Apps = append(clone.Apps, a)
		}
		return nil
	})
	if err != nil {
		_ = os.RemoveAll(staging)
		return err
	}
	err = s.withSetLock(dest, func() error {
		if err := os.Rename(staging, dest.deviceDir(udid)); err != nil {
			return err
		}
		return dest.save(clone)
	})
	if err != nil {
		_ = os.RemoveAll(staging)
		_ = os.RemoveAll(dest.deviceDir(udid))
		return err
	}
	_, err = fmt.Fprintln(s.stdout, udid)
	return err
}
