package daemon

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/hostreg"
)

// openHost opens the host registry and names this daemon as a claim owner:
// its home, its pid and its process start identity.
func (d *Daemon) openHost(ctx context.Context, o Options) error {
	dir := o.HostDir
	if dir == "" {
		dir = config.HostDir(o.Getenv)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	prober := o.Prober
	if prober == nil {
		prober = hostreg.SystemProber{}
	}
	if d.host, err = hostreg.OpenWithProber(ctx, dir, prober); err != nil {
		return fmt.Errorf("open the host registry in %s (SIMLOCK_HOST_DIR): %w", dir, err)
	}
	home, err := filepath.Abs(o.Home)
	if err != nil {
		return err
	}
	if d.self, err = hostreg.Self(home); err != nil {
		return fmt.Errorf("host registry: %w", err)
	}
	return nil
}
