package daemon

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/testhost"
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

func TestExecIsPinnedToTheLeasedDevice(t *testing.T) {
	r := fake.NewRunner()
	var env []string
	r.Always(fake.Step{Match: "fakectl --root /fake/ios on *", Do: func(_ context.Context, c ports.Command) error {
		env = c.Env
		return nil
	}})
	f := startWithRunner(t, r, 60_000)
	ctx := context.Background()
	a := f.dial("alice", "")
	l, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev, _ := f.d.engine.Device(l.Device.ID)
	_, err = a.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"on", "someone-elses", "x"}}, nil)
	ce := contract.AsError(err)
	if ce == nil || ce.Code != contract.CodePassthroughRefused || !strings.Contains(ce.NextAction, dev.Handle) {
		t.Fatalf("another device: %+v", err)
	}
	if _, err := a.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"on", dev.Handle, "x"}}, nil); err != nil {
		t.Fatalf("the leased device: %v", err)
	}
	if !slices.Contains(env, "FAKECTL_DEVICE="+dev.Handle) {
		t.Fatalf("the driver's pin did not reach the command: %q", env)
	}
}

// A command bound to a lease dies with it: releasing the lease from
// another connection kills the running command and the caller is told why.
func TestExecEndsWhenItsLeaseIsReleased(t *testing.T) {
	r := fake.NewRunner()
	started := make(chan struct{})
	r.Always(fake.Step{Match: "fakectl*", Do: func(ctx context.Context, c ports.Command) error {
		c.Stdout.Write([]byte("working\n"))
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}})
	f := startWithRunner(t, r, 600_000)
	ctx := context.Background()
	a := f.dial("alice", "")
	l, err := a.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		out []contract.ExecOutput
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var got []contract.ExecOutput
		_, err := a.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"hang"}}, func(o contract.ExecOutput) { got = append(got, o) })
		done <- answer{got, err}
	}()
	<-started
	if _, err := client.Do(ctx, f.dial("alice", ""), contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); err != nil {
		t.Fatal(err)
	}
	select {
	case ans := <-done:
		if !client.IsCode(ans.err, contract.CodeLeaseEnded) {
			t.Fatalf("exec after release: %v", ans.err)
		}
		if len(ans.out) != 1 || ans.out[0].Chunk != "working\n" {
			t.Fatalf("output before the release was lost: %+v", ans.out)
		}
	case <-time.After(testhost.Scale(30 * time.Second)):
		t.Fatal("the exec outlived its lease")
	}
	// A lease that has already ended runs nothing.
	if _, err := a.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"x"}}, nil); !client.IsCode(err, contract.CodeUnknownLease) {
		t.Fatalf("exec on an ended lease: %v", err)
	}
}

func TestPushWriterChunksAndKeepsCharactersWhole(t *testing.T) {
	var got []contract.ExecOutput
	call := &dispatch.Call{Notify: func(_ string, p any) { got = append(got, p.(contract.ExecOutput)) }}
	w := &pushWriter{ctx: context.Background(), call: call, stream: "stdout"}
	e := []byte("é") // two bytes
	w.Write([]byte{'a', e[0]})
	w.Write([]byte{e[1], 'b'})
	big := bytes.Repeat([]byte("x"), 2*maxPushChunk+5)
	w.Write(big)
	w.Write([]byte{0xe2, 0x82}) // the first two bytes of "€", then the command ends
	w.flush()
	var all strings.Builder
	for i, o := range got {
		if len(o.Chunk) > maxPushChunk {
			t.Errorf("push %d is %d bytes", i, len(o.Chunk))
		}
		if i < len(got)-1 && !utf8.ValidString(o.Chunk) {
			t.Errorf("push %d splits a character: %q", i, o.Chunk)
		}
		all.WriteString(o.Chunk)
	}
	if want := "a" + "é" + "b" + string(big) + "\xe2\x82"; all.String() != want {
		t.Fatalf("reassembled %d bytes, want %d", all.Len(), len(want))
	}
	if got[0].Chunk != "a" || got[1].Chunk != "éb" {
		t.Fatalf("first pushes %q %q", got[0].Chunk, got[1].Chunk)
	}
	// Cancelled, it pushes nothing more and stops the copy.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w = &pushWriter{ctx: ctx, call: call, stream: "stdout"}
	n := len(got)
	if _, err := w.Write([]byte("late")); err == nil || len(got) != n {
		t.Fatalf("a cancelled writer pushed: %v", err)
	}
}
