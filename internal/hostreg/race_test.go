package hostreg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// raceKeys are the devices every contender tries to claim.
func raceKeys(t testing.TB) []Key {
	var ks []Key
	for i := 0; i < 40; i++ {
		ks = append(ks, mustKey(t, fmt.Sprintf("00000000-0000-0000-0000-%012d", i)))
	}
	return ks
}

// contend claims every key as o and reports the ones it won. Any error
// other than a conflict fails the contender.
func contend(ctx context.Context, db *DB, o Owner, keys []Key) ([]Key, error) {
	var won []Key
	for _, k := range keys {
		err := db.Claim(ctx, leaseClaim(k, o, fmt.Sprintf("lse_%d", o.PID)))
		var ce *ConflictError
		switch {
		case err == nil:
			won = append(won, k)
		case errors.As(err, &ce):
		default:
			return nil, err
		}
	}
	return won, nil
}

// Two *DB handles on one file (each its own connection, as two processes
// have) claim the same keys at once: every key has exactly one winner.
func TestClaimIsAtomicAcrossHandles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	keys := raceKeys(t)
	owners := []Owner{ownerA, ownerB, {Home: "/homes/c", PID: 300, Start: "t300"}}
	p := liveAB()
	p.procs[300], p.homes["/homes/c"] = "t300", true
	wins := make([][]Key, len(owners))
	errs := make([]error, len(owners))
	var wg sync.WaitGroup
	for i, o := range owners {
		db := openTest(t, dir, p)
		// Each starts at another point of the list, so the ranges overlap.
		mine := append(append([]Key{}, keys[i*len(keys)/len(owners):]...), keys[:i*len(keys)/len(owners)]...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			wins[i], errs[i] = contend(ctx, db, o, mine)
		}()
	}
	wg.Wait()
	count := map[Key]int{}
	for i := range owners {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		for _, k := range wins[i] {
			count[k]++
		}
	}
	for _, k := range keys {
		if count[k] != 1 {
			t.Errorf("%s won %d times", k, count[k])
		}
	}
	all, err := Inspect(ctx, dir, p)
	if err != nil || len(all) != len(keys) {
		t.Fatalf("inspect: %d claims, %v", len(all), err)
	}
}

const childEnv = "HOSTREG_TEST_CHILD_DIR"

// TestChildContender is the child half of TestClaimIsAtomicAcrossProcesses:
// re-executed by the test binary, it contends as ownerB and prints its wins.
// It says READY once its handle is open and starts when the parent closes
// its stdin, so both contend at once without either polling.
func TestChildContender(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("only run as a child process")
	}
	db := openTest(t, dir, liveAB())
	fmt.Println("READY")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		t.Fatal(err)
	}
	// The reverse order of the parent's, so the two meet in the middle
	// and the keys there are really contested.
	keys := raceKeys(t)
	slices.Reverse(keys)
	won, err := contend(context.Background(), db, ownerB, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range won {
		fmt.Println("WON", k)
	}
}

func TestClaimIsAtomicAcrossProcesses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	db := openTest(t, dir, liveAB())
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChildContender$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var lines []string
	for sc.Scan() && sc.Text() != "READY" {
		lines = append(lines, sc.Text())
	}
	stdin.Close() // go
	won, err := contend(ctx, db, ownerA, raceKeys(t))
	if err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s\n%s", err, strings.Join(lines, "\n"), stderr.String())
	}
	count := map[Key]int{}
	for _, k := range won {
		count[k]++
	}
	childWins := 0
	for _, l := range lines {
		if k, ok := strings.CutPrefix(l, "WON "); ok {
			count[Key(k)]++
			childWins++
		}
	}
	for _, k := range raceKeys(t) {
		if count[k] != 1 {
			t.Errorf("%s won %d times", k, count[k])
		}
	}
	t.Logf("parent won %d, child won %d", len(won), childWins)
}
