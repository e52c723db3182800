package daemon

import (
	"context"
	"os"
	"testing"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
)

func startWithRunner(t *testing.T, runner ports.ProcessRunner, timeoutMs int64) *fixture {
	t.Helper()
	home, _ := os.MkdirTemp("", "sle-")
	cfg := config.Default()
	cfg.Capacity.Strategy, cfg.Capacity.Fixed = "fixed", config.Fixed{MaxRunning: 2, MaxManaged: 2}
	cfg.Exec.TimeoutMs = timeoutMs
	drv := fakedrv.New("ios")
	d, err := Start(context.Background(), Options{Home: home, Config: cfg, Drivers: []core.Driver{drv}, Runner: runner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(); os.RemoveAll(home) })
	return &fixture{t: t, d: d, home: home, drv: drv}
}

func TestExecStreamsOutputAndChecksTheRequester(t *testing.T) {
	r := fake.NewRunner()
	r.Always(fake.Step{Match: "fakectl --root /fake/ios hello*", Stdout: "hi there\n", Stderr: "warn\n", ExitCode: 3})
	f := startWithRunner(t, r, 60_000)
	ctx := context.Background()
	a := f.dial("alice", "")
	l, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []contract.ExecOutput
	out, err := a.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"hello"}}, func(o contract.ExecOutput) { got = append(got, o) })
	if err != nil || out.ExitCode != 3 {
		t.Fatalf("exec: %+v %v", out, err)
	}
	if len(got) != 2 {
		t.Fatalf("pushes %+v", got)
	}
	if _, err := a.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"kill"}}, nil); !client.IsCode(err, contract.CodePassthroughRefused) {
		t.Fatalf("refused verb: %v", err)
	}
	if _, err := a.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "gdb", Args: []string{}}, nil); !client.IsCode(err, contract.CodeUnknownPassthroughTool) {
		t.Fatalf("unknown tool: %v", err)
	}
	// Admin bypasses ownership but not the requester match.
	adm := f.dial("op", f.adminToken())
	if _, err := adm.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"hello"}}, nil); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("admin without the requester: %v", err)
	}
	if _, err := adm.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"hello"}, RequesterID: "alice"}, nil); err != nil {
		t.Fatalf("admin with the requester: %v", err)
	}
	bob := f.dial("bob", "")
	if _, err := bob.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"hello"}, RequesterID: "alice"}, nil); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("bob on alice's lease: %v", err)
	}
}

func TestExecTimeoutKillsTheCommand(t *testing.T) {
	r := fake.NewRunner()
	r.Always(fake.Step{Match: "fakectl*", Do: func(ctx context.Context, _ ports.Command) error {
		<-ctx.Done()
		return ctx.Err()
	}})
	f := startWithRunner(t, r, 100)
	a := f.dial("alice", "")
	l, err := a.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(context.Background(), contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"hang"}}, nil); !client.IsCode(err, contract.CodeExecTimeout) {
		t.Fatalf("got %v", err)
	}
}
