package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
)

// Lease a device, use it, give it back. The examples that print output run
// against a real daemon on simlock's fake driver, started by the test
// binary; your program would reach the daemon the CLI uses.
func Example() {
	stop := startExampleDaemon() // a daemon on the fake driver; sets SIMLOCK_HOME
	defer stop()

	ctx := context.Background()
	c, err := client.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil, client.TTL(10*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leased an", l.Platform, "device for", time.Duration(l.TTLMs)*time.Millisecond)

	out, err := c.LeaseRelease(ctx, l.LeaseID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", out.Released)
	// Output:
	// leased an ios device for 10m0s
	// released: true
}

// Lease, hold, release: Hold renews the lease every third of its TTL while
// a long job runs, reconnects if the daemon restarts, and says when the
// lease is lost; Release stops renewing and gives the lease back.
func ExampleClient_Hold() {
	stop := startExampleDaemon()
	defer stop()

	ctx := context.Background()
	c, err := client.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil, client.TTL(300*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	h := c.Hold(ctx, l)
	job := time.After(time.Second) // the job: longer than the 300ms TTL
	select {
	case <-job:
		fmt.Println("the job finished with the lease still held")
	case <-h.Lost():
		fmt.Println("lease lost:", h.Err())
	}
	if err := h.Release(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = c.LeaseGet(ctx, l.LeaseID)
	var ce *contract.Error
	if errors.As(err, &ce) {
		fmt.Println("after release:", ce.Code)
	}
	// Output:
	// the job finished with the lease still held
	// after release: UNKNOWN_LEASE
}

// Run a tool against the leased device on the daemon's machine, streaming
// its output. (The fake driver's tool, fakectl, echoes its arguments.)
func ExampleClient_Exec() {
	stop := startExampleDaemon()
	defer stop()

	ctx := context.Background()
	c, err := client.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.LeaseRelease(ctx, l.LeaseID)

	res, err := c.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"hello", "device"}},
		func(o contract.ExecOutput) {
			if o.Stream == "stdout" {
				fmt.Print(o.Chunk)
			}
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code", res.ExitCode)
	// Output:
	// hello device
	// exit code 0
}

// Wait at most a minute in the queue for a device. The daemon answers
// QUEUE_TIMEOUT when the wait runs out; ctx bounds the call on the
// client's side too. (Compile-only: it needs a busy daemon.)
func ExampleClient_LeaseRequest_timeout() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "android"},
		func(p contract.Progress) {
			if p.Phase == "queued" {
				fmt.Fprintf(os.Stderr, "queued at position %d\n", p.QueuePosition)
			}
		}, client.QueueTimeout(time.Minute))
	switch {
	case client.IsCode(err, contract.CodeQueueTimeout):
		fmt.Println("no device within a minute; try later")
		return
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Println("gave up waiting")
		return
	case err != nil:
		log.Fatal(err)
	}
	fmt.Println("got", l.DeviceID)
}

// Read what happened: the buffered events come back in the result; with
// Follow set, onEvent then receives each later event until ctx ends.
func ExampleClient_Events() {
	stop := startExampleDaemon()
	defer stop()

	ctx := context.Background()
	c, err := client.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.LeaseRelease(ctx, l.LeaseID); err != nil {
		log.Fatal(err)
	}
	out, err := c.Events(ctx, contract.EventsSubscribeIn{}, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range out.Events {
		if strings.HasPrefix(e.Type, "lease.") && e.LeaseID == l.LeaseID {
			fmt.Println(e.Type)
		}
	}
	// Output:
	// lease.granted
	// lease.released
}

// Tell refusals apart by their code; every code is a contract.Code constant.
func ExampleIsCode() {
	stop := startExampleDaemon()
	defer stop()

	ctx := context.Background()
	c, err := client.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_, err = c.LeaseRenew(ctx, "lse_nosuch")
	if client.IsCode(err, contract.CodeUnknownLease) {
		fmt.Println("that lease has ended:", contract.InfoFor(contract.CodeUnknownLease).NextAction)
	}
	// Output:
	// that lease has ended: the lease has ended (released or expired); request a new one
}

// Follow events live: with Follow set, Events answers with the backlog at
// once and then hands each new event to onEvent until ctx ends.
func ExampleClient_Events_follow() {
	stop := startExampleDaemon()
	defer stop()

	ctx := context.Background()
	c, err := client.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fctx, unfollow := context.WithCancel(ctx)
	defer unfollow()
	// onEvent runs on the connection's reader, so it hands each event on
	// rather than working (or waiting) there.
	events := make(chan contract.Event, 64)
	if _, err := c.Events(fctx, contract.EventsSubscribeIn{Follow: true}, func(e contract.Event) { events <- e }); err != nil {
		log.Fatal(err)
	}
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.LeaseRelease(ctx, l.LeaseID); err != nil {
		log.Fatal(err)
	}
	for e := range events {
		if e.LeaseID != l.LeaseID || !strings.HasPrefix(e.Type, "lease.") {
			continue
		}
		fmt.Println("live:", e.Type)
		if e.Type == "lease.released" {
			break
		}
	}
	// Output:
	// live: lease.granted
	// live: lease.released
}

// A broker session: prepare a device by requirements under an owner token,
// prove the owner alive, and release it. The same token and configuration
// always answer with the same receipt, so a retried prepare never takes a
// second device. (A long-lived owner runs client.KeepSession instead of
// heartbeating by hand.)
func ExampleClient_SessionPrepare() {
	stop := startExampleDaemonWith(func(c *config.Config) { c.Sessions = &config.Sessions{} })
	defer stop()

	ctx := context.Background()
	c, err := client.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	const owner = "owner-secret-1" // keep it: every later call on the session needs it
	in := contract.SessionPrepareIn{OwnerToken: owner, Config: contract.SessionConfig{
		ContractVersion: 1, RequestID: "build-42-attempt-1",
		Device: contract.DeviceRequirement{SchemaVersion: 1, Platform: "ios", Hardware: &contract.HardwareRequirement{
			Kind: contract.HardwareModel, Model: &contract.ModelIdentity{Namespace: "simlock-model", Value: "Phone"}}},
	}}
	r, err := c.SessionPrepare(ctx, in, client.Wait(5*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("session", r.Status, "on a", r.Device.Model)
	again, err := c.SessionPrepare(ctx, in)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a repeated prepare is the same session:", again.SessionID == r.SessionID)

	if _, err := c.SessionHeartbeat(ctx, contract.SessionHeartbeatIn{SessionID: r.SessionID, OwnerToken: owner}); err != nil {
		log.Fatal(err)
	}
	rel, err := c.SessionRelease(ctx, contract.SessionReleaseIn{SessionID: r.SessionID, OwnerToken: owner}, client.ReplyBudget(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("release:", rel.Outcome)
	// Output:
	// session ready on a Phone
	// a repeated prepare is the same session: true
	// release: released
}
