package daemon

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/ports"
)

// deviceExec runs a driver-resolved tool command for a lease holder on this
// machine and streams its output back. The requester check applies to
// admin sessions too: it is what stops one gateway-forwarded agent from
// reaching another agent's device.
func (d *Daemon) deviceExec(ctx context.Context, call *dispatch.Call, in contract.DeviceExecIn) (contract.DeviceExecOut, error) {
	l, ok := d.engine.Lease(in.LeaseID)
	if !ok {
		return contract.DeviceExecOut{}, core.ErrUnknownLease
	}
	req := in.RequesterID
	if req == "" {
		req = call.Session.Principal
	}
	if req != l.RequesterID {
		return contract.DeviceExecOut{}, contract.Errorf(contract.CodeForbidden,
			"lease %s belongs to requester %q, not %q", l.ID, l.RequesterID, req).
			WithNext("pass the lease's requesterId (simlock exec --requester)")
	}
	drv, ok := d.engine.Driver(l.Platform)
	if !ok {
		return contract.DeviceExecOut{}, core.ErrUnsupportedPlatform
	}
	pt, ok := drv.(core.Passthrougher)
	if !ok {
		return contract.DeviceExecOut{}, core.NewSpecError(core.ErrUnknownTool, "the "+l.Platform+" driver runs no tools")
	}
	// Pipes, not a terminal: the driver refuses what needs one.
	cmd, err := pt.ResolvePassthrough(in.Tool, in.Args, false)
	if err != nil {
		return contract.DeviceExecOut{}, err
	}
	// The device's own environment (e.g. ANDROID_SERIAL) scopes the tool to
	// the leased device.
	if dev, ok := d.engine.Device(l.DeviceID); ok {
		for k, v := range dev.Attrs {
			if name, ok := strings.CutPrefix(k, core.AttrEnvPrefix); ok {
				cmd.Env = append(cmd.Env, name+"="+v)
			}
		}
	}
	if in.Stdin != "" {
		cmd.Stdin = strings.NewReader(in.Stdin)
	}
	cmd.Stdout = &pushWriter{call: call, stream: "stdout"}
	cmd.Stderr = &pushWriter{call: call, stream: "stderr"}
	timeout := time.Duration(d.cfg.Exec.TimeoutMs) * time.Millisecond
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := d.runner.Run(ectx, cmd)
	var ee *ports.ExitError
	switch {
	case err == nil, errors.As(err, &ee):
		return contract.DeviceExecOut{ExitCode: res.ExitCode}, nil
	case errors.Is(ectx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		return contract.DeviceExecOut{}, contract.Errorf(contract.CodeExecTimeout, "%s ran longer than exec.timeoutMs (%s) and was killed", in.Tool, timeout)
	default:
		return contract.DeviceExecOut{}, err
	}
}

// pushWriter turns command output into request-scoped "output" pushes.
type pushWriter struct {
	mu     sync.Mutex
	call   *dispatch.Call
	stream string
}

func (w *pushWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.call.Push(contract.NotifyOutput, contract.ExecOutput{Stream: w.stream, Chunk: string(p)})
	return len(p), nil
}
