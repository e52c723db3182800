package ios

import (
	"context"
	"errors"
	"io/fs"
	"sort"

	"github.com/simlock/simlock/internal/core"
)

var _ core.GoldenRemover = (*Driver)(nil)

// RemoveGoldens implements core.GoldenRemover for a reset: every device in
// the golden set is deleted, recorded or not (a build that died before its
// record was written leaves one), and the record is emptied. It runs even
// with clone provisioning off now, because goldens an earlier run made
// still take disk. A build in flight finishes first, or it would record a
// golden after the removal.
func (d *Driver) RemoveGoldens(ctx context.Context) ([]string, error) {
	if d.defaultSet {
		return nil, nil // no golden set outside simlock's own root
	}
	d.clone.wg.Wait()
	d.clone.mu.Lock()
	defer d.clone.mu.Unlock()
	if _, err := d.fs.Stat(d.goldenSet()); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	f, rerr := d.readGoldens()
	var removed []string
	for _, g := range f.Goldens {
		if g.UDID != "" {
			removed = append(removed, g.UDID)
		}
	}
	sort.Strings(removed)
	if _, err := d.goldenSimctl(ctx, "delete", "all"); err != nil {
		return nil, err
	}
	if err := d.updateGoldens(func(f *goldenFile) { f.Goldens = map[string]golden{} }); err != nil {
		return removed, err
	}
	for key := range d.clone.ready {
		delete(d.clone.ready, key)
	}
	if rerr != nil {
		d.log.Warn("golden record was unreadable; deleted the golden set all the same", "err", rerr)
	}
	return removed, nil
}
