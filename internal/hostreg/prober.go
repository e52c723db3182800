package hostreg

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// SystemProber probes the real operating system. Process start identities
// come from prober_<os>.go; on a platform without one every probe fails,
// which classifies as alive (fail closed).
type SystemProber struct{}

// ProcessStart reports pid's start identity.
func (SystemProber) ProcessStart(ctx context.Context, pid int) (string, bool, error) {
	if pid <= 0 {
		return "", false, errors.New("hostreg: invalid pid")
	}
	return processStart(pid)
}

// HomeExists proves a home gone only on ENOENT or ENOTDIR: a permission
// error, a stale mount or an I/O error says nothing about the home.
func (SystemProber) HomeExists(ctx context.Context, home string) (bool, error) {
	_, err := os.Lstat(home)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		return false, nil
	default:
		return false, err
	}
}

// Self is the calling process as a claim owner of home: the daemon builds
// its Owner once at startup with it.
func Self(home string) (Owner, error) {
	start, alive, err := processStart(os.Getpid())
	if err != nil {
		return Owner{}, err
	}
	if !alive || start == "" {
		return Owner{}, errors.New("hostreg: cannot read this process's own start time")
	}
	return Owner{Home: home, PID: os.Getpid(), Start: start}, nil
}
