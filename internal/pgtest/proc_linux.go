//go:build linux

package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// runAs is the OS user the server runs as: the test's own, or, when the
// test runs as root, the postgres user (initdb and postgres refuse root).
type runAs struct {
	cred *syscall.Credential // nil: the test's own user
	home string
}

func serverUser() (runAs, error) {
	if os.Geteuid() != 0 {
		return runAs{}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return runAs{}, fmt.Errorf("running as root and no postgres user to run the server as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return runAs{}, fmt.Errorf("postgres uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return runAs{}, fmt.Errorf("postgres gid %q: %w", u.Gid, err)
	}
	return runAs{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, home: u.HomeDir}, nil
}

func (a runAs) own(path string) error {
	if a.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(a.cred.Uid), int(a.cred.Gid)); err != nil {
		return fmt.Errorf("chown %s: %w", path, err)
	}
	return nil
}

func (a runAs) env() []string {
	env := append(os.Environ(), "LC_ALL=C")
	if a.cred != nil {
		env = append(env, "HOME="+a.home)
	}
	return env
}

func (a runAs) apply(cmd *exec.Cmd) {
	// Pdeathsig: a test binary that dies without its cleanups (a panic, a
	// -timeout) takes its server with it instead of leaving it running.
	// SIGQUIT is PostgreSQL's immediate shutdown, which stops the backends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: a.cred, Pdeathsig: syscall.SIGQUIT}
}
