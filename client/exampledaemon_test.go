package client_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/daemon/daemontest"
)

// exampleTB lets an Example, which has no *testing.T, start a daemontest
// stack: a real daemon (dispatcher, engine, store, socket) on the fake
// driver and a fake clock.
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (e *exampleTB) Helper()                   {}
func (e *exampleTB) Cleanup(f func())          { e.cleanups = append(e.cleanups, f) }
func (e *exampleTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (e *exampleTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

// startExampleDaemon starts a daemon with one iOS slot, points
// SIMLOCK_HOME at it (and clears SIMLOCK_URL) so client.FromEnv finds it,
// and returns what stops it.
func startExampleDaemon() (stop func()) { return startExampleDaemonWith(nil) }

// startExampleDaemonWith is startExampleDaemon with the daemon's
// configuration edited first (sessions served, say).
func startExampleDaemonWith(edit func(*config.Config)) (stop func()) {
	tb := &exampleTB{}
	st := daemontest.Start(tb, daemontest.Options{Config: edit})
	restore := setenv(map[string]string{client.EnvHome: st.Home, client.EnvURL: "", client.EnvToken: "", client.EnvPrincipal: "example"})
	return func() {
		restore()
		for i := len(tb.cleanups) - 1; i >= 0; i-- {
			tb.cleanups[i]()
		}
	}
}

func setenv(vars map[string]string) (restore func()) {
	old := map[string]*string{}
	for k, v := range vars {
		if prev, ok := os.LookupEnv(k); ok {
			old[k] = &prev
		} else {
			old[k] = nil
		}
		os.Setenv(k, v)
	}
	return func() {
		for k, v := range old {
			if v == nil {
				os.Unsetenv(k)
			} else {
				os.Setenv(k, *v)
			}
		}
	}
}
