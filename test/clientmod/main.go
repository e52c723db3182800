// Command clientmod is what a user's program does with simlock's Go client:
// lease a device, hold it while it works, give it back. It reaches the
// daemon through client.FromEnv and speaks one line per step on stdout, so
// test/e2e can drive it: after "held <leaseId>" it holds until a line
// arrives on stdin, then releases and prints "released <leaseId>
// reconnects=<n>". A lease lost meanwhile prints "lost <code>" and exits 3.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "clientmod:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	c, err := client.FromEnv(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	// 10s: long enough that a loaded machine's stall around a daemon
	// restart does not let the lease lapse (test/e2e reads it back).
	l, err := c.LeaseRequest(ctx, contract.LeaseRequestIn{Platform: "ios"}, nil, client.TTL(10*time.Second))
	if err != nil {
		return err
	}
	h := c.Hold(ctx, l)
	fmt.Println("held", l.LeaseID)

	release := make(chan struct{})
	go func() {
		bufio.NewReader(os.Stdin).ReadString('\n')
		close(release)
	}()
	select {
	case <-h.Lost():
		fmt.Println("lost", contract.AsError(h.Err()).Code)
		os.Exit(3)
	case <-release:
	}
	if err := h.Release(ctx); err != nil {
		return err
	}
	fmt.Printf("released %s reconnects=%d\n", l.LeaseID, h.Reconnects())
	return nil
}
