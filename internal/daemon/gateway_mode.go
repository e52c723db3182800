package daemon

import (
	"context"
	"net"
	"path/filepath"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/dispatch"
	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/gwstore"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/transport/httpapi"
	"github.com/simlock/simlock/internal/transport/socket"
	"github.com/simlock/simlock/internal/transport/uplink"
)

// startGateway runs this daemon as a fleet gateway: no drivers, roots,
// reaper, health monitor or capacity strategy; the same contract served
// over the socket and HTTP, answered from worker views; workers join over
// uplinks that upgrade from the HTTP listener.
func (d *Daemon) startGateway(o Options, ln, hln net.Listener) error {
	if keys := o.Config.IgnoredInGateway(); len(keys) > 0 {
		d.log.Warn("a gateway ignores these configuration keys", "keys", keys)
	}
	store, closeStore, err := gwstore.Open(context.Background(), o.Config.Gateway.Store.Postgres.DSN, o.Config.Gateway.Store.Postgres.PoolSize, d.db)
	if err != nil {
		return err
	}
	gw, err := gateway.New(gateway.Options{
		InstanceID: d.instanceID, Clock: o.Clock, Log: ports.Module(o.Logger, "gateway"), Bus: d.bus,
		DrainFile: filepath.Join(o.Home, "workers.json"), FS: o.FS, Routing: o.Config.Gateway.Routing,
		DisconnectedRetention: ms(o.Config.Gateway.DisconnectedRetentionMs), ExecTimeout: ms(o.Config.Gateway.ExecTimeoutMs),
		DefaultTTL: ms(o.Config.Lease.DefaultTTLMs), MaxTTL: ms(o.Config.Lease.MaxTTLMs),
		DaemonInfo: d.daemonInfo, Journal: d.journal,
		Store: store, CloseStore: closeStore, Retention: ms(o.Config.Requests.RetentionMs), MaxReceipts: o.Config.Requests.MaxReceipts, MaxPerPrincipal: o.Config.Queue.MaxPerPrincipal, // ADR 0101
	})
	if err != nil {
		return err
	}
	d.gw = gw
	d.disp = dispatch.New(dispatch.Options{Log: ports.Module(o.Logger, "dispatcher"), Ready: d.awaitReady,
		LeaseOwner: gw.LeaseOwner, MapError: func(err error) *contract.Error {
			// As on a worker, then the gateway's own codes (WORKER_UNREACHABLE, ...).
			if ce := toContractError(err); ce.Code != contract.CodeInternal {
				return ce
			}
			return gateway.MapError(err)
		}})
	d.registerCommon(d.disp)
	gw.Register(d.disp)

	sctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.cancelConverge = func() {}

	// A gateway always listens on HTTP (agents and uplinks; Start claimed the port).
	acceptor := &uplink.Acceptor{
		Log: ports.Module(o.Logger, "uplink"),
		Verify: func(ctx context.Context, bearer string) (string, bool, error) {
			t, ok, err := d.VerifyToken(ctx, bearer)
			return t.Role, ok, err
		},
		Rejected: gw.Rejected,
		Attach: func(ctx context.Context, id, label string, conn net.Conn) {
			// The gateway is the protocol client on the uplink.
			c, err := client.NewConn(ctx, conn, client.Options{Principal: "gateway:" + d.instanceID, Name: "simlock-gateway " + d.version})
			if err != nil {
				// A worker whose protocol range does not overlap ours is shown
				// incompatible (the machine to upgrade) and disconnected, never hidden.
				done := make(chan struct{})
				if ic, ok := gateway.IncompatibleFromHelloError(err, done, func() error { return conn.Close() }); ok {
					_ = gw.Attach(ctx, id, label, ic)
					close(done)
					return
				}
				d.log.Warn("uplink hello failed", "worker", id, "err", err)
				return
			}
			if err := gw.Attach(ctx, id, label, c); err != nil {
				d.log.Warn("worker view could not be built", "worker", id, "err", err)
				return
			}
			select {
			case <-c.Done():
			case <-ctx.Done():
				c.Close()
			}
		},
	}
	d.srv = &socket.Server{D: socketAdapter{d}, Log: ports.Module(o.Logger, "socket")}
	d.http = httpapi.New(httpapi.Options{Backend: httpAdapter{socketAdapter{d}}, Logger: ports.Module(o.Logger, "http"),
		Clock: o.Clock, Version: o.Version, Uplink: acceptor, Metrics: d.MetricsHandler()})
	d.httpDone = make(chan struct{})
	go func() {
		defer close(d.httpDone)
		if err := d.http.Serve(sctx, hln); err != nil {
			d.log.Error("http server stopped", "err", err)
		}
	}()
	// The socket serves once the HTTP server and its done channel are set,
	// which daemon.stop reads.
	go func() {
		if err := d.srv.Serve(sctx, ln); err != nil {
			d.log.Error("socket server stopped", "err", err)
		}
	}()
	d.startPushes(sctx) // lease-scoped facts reach their owners' connections as on a worker
	close(d.converged)  // nothing to converge: views are rebuilt from workers as they connect
	d.readyOnce.Do(func() { close(d.readyCh) })
	d.log.Info("gateway started", "pid", d.pid, "http", d.httpAddr, "instance", d.instanceID)
	return nil
}
