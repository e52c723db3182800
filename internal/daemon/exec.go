package daemon

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/core/events"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/ports"
)

// Why an exec's context ended, told apart from the client going away.
var (
	errLeaseEnded  = errors.New("the lease ended")
	errExecTimeout = errors.New("exec.timeoutMs elapsed")
)

// deviceExec runs a driver-resolved tool command for a lease holder on this
// machine and streams its output back. The requester check applies to
// admin sessions too: it is what stops one gateway-forwarded agent from
// reaching another agent's device. The command is confined to the lease
// for its whole life: the driver pins it to the leased device, and it is
// killed the moment the lease ends.
func (d *Daemon) deviceExec(ctx context.Context, call *dispatch.Call, in contract.DeviceExecIn) (out contract.DeviceExecOut, err error) {
	l, ok := d.engine.Lease(in.LeaseID)
	if !ok {
		return contract.DeviceExecOut{}, core.ErrUnknownLease
	}
	d.sessions.TouchLease(in.LeaseID) // a device call restarts a session's idle window
	req := in.RequesterID
	if req == "" {
		req = call.Session.Principal
	}
	if err := d.slots.GuardLease(l, call.Session.Principal, req, true); err != nil {
		return contract.DeviceExecOut{}, err
	}
	if req != l.RequesterID {
		return contract.DeviceExecOut{}, contract.Errorf(contract.CodeForbidden,
			"lease %s belongs to requester %q, not %q", l.ID, l.RequesterID, req).
			WithNext("pass the lease's requesterId (simlock exec --requester)")
	}
	// Watch before resolving: a lease that ends from here on stops the
	// command, and one that already ended reads as closed.
	ended := d.engine.Watch().LeaseEnded(l.ID)
	drv, ok := d.engine.Driver(l.Platform)
	if !ok {
		return contract.DeviceExecOut{}, core.ErrUnsupportedPlatform
	}
	pt, ok := drv.(core.Passthrougher)
	if !ok {
		return contract.DeviceExecOut{}, core.NewSpecError(core.ErrUnknownTool, "the "+l.Platform+" driver runs no tools")
	}
	dev, ok := d.engine.Device(l.DeviceID)
	if !ok {
		return contract.DeviceExecOut{}, leaseEnded(l.ID)
	}
	ref := dev.Ref()
	// {udid}, {serial}, {deviceSet} and {leaseId} mean what they mean to
	// simlock run (one expansion, in contract); a placeholder of the other
	// platform is refused before anything runs.
	args, err := contract.ExpandPlaceholders(in.Args, contract.LeaseValues(d.leaseOut(l)))
	if err != nil {
		return contract.DeviceExecOut{}, err
	}
	// {upload:NAME} becomes the lease's own file here, on the machine that
	// holds it, and an unknown name stops the command before it starts.
	if args, err = d.uploads.Substitute(l.ID, args); err != nil {
		return contract.DeviceExecOut{}, err
	}
	// Pipes, not a terminal: the driver refuses what needs one. The pin
	// confines every device selector to the lease's own device.
	cmd, err := pt.ResolvePassthrough(in.Tool, args, core.PassthroughScope{Pin: &ref})
	if err != nil {
		return contract.DeviceExecOut{}, err
	}
	// The device's own environment (e.g. ANDROID_SERIAL) scopes the tool to
	// the leased device; it comes last so the daemon's own environment
	// cannot override it.
	for k, v := range dev.Attrs {
		if name, ok := strings.CutPrefix(k, core.AttrEnvPrefix); ok {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	if in.Stdin != "" {
		cmd.Stdin = strings.NewReader(in.Stdin)
	}

	timeout := time.Duration(d.cfg.Exec.TimeoutMs) * time.Millisecond
	tctx, cancelTimeout := context.WithTimeoutCause(ctx, timeout, errExecTimeout)
	defer cancelTimeout()
	ectx, cancel := context.WithCancelCause(tctx)
	defer cancel(nil)
	go func() {
		select {
		case <-ended:
			cancel(errLeaseEnded)
		case <-ectx.Done():
		}
	}()

	start := d.clock.Now()
	defer func() { d.publishExec(l, in.Tool, start, out, err) }()

	stdout := &pushWriter{ctx: ectx, call: call, stream: "stdout"}
	stderr := &pushWriter{ctx: ectx, call: call, stream: "stderr"}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	res, err := d.runner.Run(ectx, cmd)
	stdout.flush()
	stderr.flush()
	var ee *ports.ExitError
	if err == nil || errors.As(err, &ee) {
		return contract.DeviceExecOut{ExitCode: res.ExitCode}, nil
	}
	switch cause := context.Cause(ectx); {
	case ctx.Err() != nil:
		return contract.DeviceExecOut{}, ctx.Err() // the caller went away
	case errors.Is(cause, errLeaseEnded):
		return contract.DeviceExecOut{}, leaseEnded(l.ID)
	case errors.Is(cause, errExecTimeout):
		return contract.DeviceExecOut{}, contract.Errorf(contract.CodeExecTimeout, "%s ran longer than exec.timeoutMs (%s) and was killed", in.Tool, timeout)
	default:
		return contract.DeviceExecOut{}, err
	}
}

// publishExec records one command that ran (device.exec-finished): how it
// ended, and how long it took. It is the only measurement of an exec, for
// metrics and the journal alike.
func (d *Daemon) publishExec(l core.LeaseRecord, tool string, start time.Time, out contract.DeviceExecOut, err error) {
	data := map[string]any{"tool": tool, "ownerId": l.OwnerID, "durationMs": d.clock.Now().Sub(start).Milliseconds()}
	outcome := "exited"
	var ce *contract.Error
	switch {
	case err == nil:
		data["exitCode"] = out.ExitCode
	case errors.As(err, &ce) && ce.Code == contract.CodeExecTimeout:
		outcome = "timeout"
	case errors.As(err, &ce) && ce.Code == contract.CodeLeaseEnded:
		outcome = "lease-ended"
	case errors.Is(err, context.Canceled):
		outcome = "cancelled"
	default:
		outcome = "error"
	}
	data["outcome"] = outcome
	d.bus.Publish(events.Event{Type: "device.exec-finished", LeaseID: l.ID, DeviceID: l.DeviceID, RequesterID: l.RequesterID,
		Platform: l.Platform, Data: data})
}

func leaseEnded(id string) error {
	return contract.Errorf(contract.CodeLeaseEnded,
		"lease %s ended (released, expired, lost or reset) while the command ran; the command was killed", id).
		WithDetails("leaseId", id)
}

// maxPushChunk caps one output push. os/exec hands over at most 32 KiB per
// write; this keeps a push small whatever writer feeds it.
const maxPushChunk = 32 << 10

// pushWriter turns command output into request-scoped "output" pushes, one
// push per write, sent before the write returns. It buffers nothing but an
// incomplete UTF-8 sequence (at most 3 bytes) held back for the next write,
// so a character split across two reads is not mangled into U+FFFD. A
// client that reads slowly therefore slows the command instead of growing
// the daemon's memory: how long a push may block, and what happens to a
// client that cannot keep up, is the transport's per-connection queue's
// decision.
type pushWriter struct {
	ctx    context.Context
	call   *dispatch.Call
	stream string

	mu    sync.Mutex
	carry []byte
}

func (w *pushWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	written := 0
	for written < len(p) {
		// A cancelled command gets no more pushes: its copy loop ends here.
		if err := w.ctx.Err(); err != nil {
			return written, err
		}
		n := min(len(p)-written, maxPushChunk-len(w.carry))
		chunk := p[written : written+n]
		if len(w.carry) > 0 {
			chunk = append(w.carry, chunk...)
		}
		written += n
		cut := wholeRunes(chunk)
		w.carry = append([]byte(nil), chunk[cut:]...)
		if cut > 0 {
			w.call.Push(contract.NotifyOutput, contract.ExecOutput{Stream: w.stream, Chunk: string(chunk[:cut])})
		}
	}
	return written, nil
}

// flush pushes whatever was held back, once the command has ended.
func (w *pushWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.carry) > 0 {
		w.call.Push(contract.NotifyOutput, contract.ExecOutput{Stream: w.stream, Chunk: string(w.carry)})
		w.carry = nil
	}
}

// wholeRunes returns the length of b's longest prefix that does not end in
// the middle of a UTF-8 sequence. Invalid bytes count as whole: only a
// sequence that the next bytes could still complete is held back.
func wholeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
