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
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", TTLMs: (10 * time.Minute).Milliseconds()}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leased an", l.Platform, "device for", time.Duration(l.TTLMs)*time.Millisecond)

	out, err := client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", out.Released)
	// Output:
	// leased an ios device for 10m0s
	// released: true
}

// Keep a lease alive while a long job runs: Hold renews it every third of
// its TTL, reconnects if the daemon restarts, and says when it is lost.
func ExampleClient_Hold() {
	stop := startExampleDaemon()
	defer stop()

	ctx := context.Background()
	c, err := client.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios", TTLMs: 300}, nil)
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
	_, err = client.Do(ctx, c, contract.LeaseGet, contract.LeaseGetIn{LeaseID: l.LeaseID})
	fmt.Println("after release:", contract.AsError(err).Code)
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
	defer client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID})

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
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "android", TimeoutMs: time.Minute.Milliseconds()},
		func(p contract.Progress) {
			if p.Phase == "queued" {
				fmt.Fprintf(os.Stderr, "queued at position %d\n", p.QueuePosition)
			}
		})
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
	if _, err := client.Do(ctx, c, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); err != nil {
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
	_, err = client.Do(ctx, c, contract.LeaseRenew, contract.LeaseRenewIn{LeaseID: "lse_nosuch"})
	if client.IsCode(err, contract.CodeUnknownLease) {
		fmt.Println("that lease has ended:", contract.InfoFor(contract.CodeUnknownLease).NextAction)
	}
	// Output:
	// that lease has ended: the lease has ended (released or expired); request a new one
}
