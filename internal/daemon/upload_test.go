package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
	fakedrv "github.com/simlock/simlock/internal/drivers/fake"
	"github.com/simlock/simlock/internal/ports"
	"github.com/simlock/simlock/internal/ports/fake"
	"github.com/simlock/simlock/internal/uploads"
)

// startUploads starts a daemon whose disk holds freeDisk bytes (the guard
// keeps 10 GiB by default) and whose cap is maxBytes.
func startUploads(t *testing.T, runner ports.ProcessRunner, maxBytes int64, freeDisk uint64) *fixture {
	t.Helper()
	home, _ := os.MkdirTemp("", "slu-")
	cfg := config.Default()
	cfg.Capacity.Strategy, cfg.Capacity.Fixed = "fixed", config.Fixed{MaxRunning: 2, MaxManaged: 2}
	cfg.Capacity.Host.MaxRunning = 8
	cfg.Upload.MaxBytes = maxBytes
	cfg.DiskPressure.FreeBytesThreshold = 1 << 20
	drv := fakedrv.New("ios")
	d, err := Start(context.Background(), Options{Home: home, Config: cfg, Drivers: []core.Driver{drv}, Runner: runner,
		Stats: &fake.Stats{CPUs: 4, TotalRAM: 16 << 30, FreeRAM: 8 << 30, FreeDisk: freeDisk}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(); os.RemoveAll(home) })
	return &fixture{t: t, d: d, home: home, drv: drv}
}

func leaseFor(t *testing.T, c *client.Client) contract.Lease {
	t.Helper()
	l, err := c.LeaseRequest(context.Background(), contract.LeaseRequestIn{Platform: "ios"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// scratchFiles lists what the lease's scratch directory holds (nil when it
// does not exist).
func scratchFiles(t *testing.T, f *fixture, leaseID string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(f.home, "uploads", leaseID))
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// waitGone waits (bounded) for the watcher goroutine to remove a path.
func waitGone(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(path); os.IsNotExist(err) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s still exists", path)
}

func TestUploadStreamsChunksAndExecNamesTheFile(t *testing.T) {
	r := fake.NewRunner()
	var mu sync.Mutex
	var installed [][]byte
	var paths []string
	r.Always(fake.Step{Match: "fakectl --root /fake/ios install *", Do: func(_ context.Context, c ports.Command) error {
		p := c.Args[len(c.Args)-1]
		b, err := os.ReadFile(p)
		mu.Lock()
		defer mu.Unlock()
		installed, paths = append(installed, b), append(paths, p)
		return err
	}})
	f := startUploads(t, r, 64<<20, 100<<30)
	ctx := context.Background()
	a := f.dial("alice", "")
	l := leaseFor(t, a)

	// 2.5 chunks: three device.upload calls, the last one Final.
	data := bytes.Repeat([]byte("0123456789abcdef"), (5*contract.UploadChunkBytes/2)/16)
	out, err := a.Upload(ctx, l.LeaseID, "app.apk", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if !out.Complete || out.Received != int64(len(data)) || out.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("upload answer %+v", out)
	}
	dir := filepath.Join(f.home, "uploads", l.LeaseID)
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("scratch dir %v %v", st, err)
	}
	if got := scratchFiles(t, f, l.LeaseID); len(got) != 1 || got[0] != "app.apk" {
		t.Fatalf("scratch holds %v", got)
	}

	if _, err := a.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"install", "{upload:app.apk}"}}, nil); err != nil {
		t.Fatal(err)
	}
	// A re-upload replaces the file under the same name.
	if _, err := a.Upload(ctx, l.LeaseID, "app.apk", strings.NewReader("v2")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"install", "{upload:app.apk}"}}, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(installed) != 2 || !bytes.Equal(installed[0], data) || string(installed[1]) != "v2" {
		t.Fatalf("the command read %d files", len(installed))
	}
	if want := filepath.Join(dir, "app.apk"); paths[0] != want || !filepath.IsAbs(paths[0]) {
		t.Fatalf("substituted %q, want %q", paths[0], want)
	}
	mu.Unlock()

	// An unknown name is refused before anything runs.
	calls := len(r.Calls)
	if _, err := a.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"install", "{upload:other.apk}"}}, nil); !client.IsCode(err, contract.CodeUnknownUpload) {
		t.Fatalf("unknown upload: %v", err)
	}
	if len(r.Calls) != calls {
		t.Fatalf("a command ran for an unknown upload: %v", r.Calls[calls:])
	}

	// Someone else's lease is not theirs to upload to.
	if _, err := f.dial("bob", "").Upload(ctx, l.LeaseID, "x.apk", strings.NewReader("x")); !client.IsCode(err, contract.CodeForbidden) {
		t.Fatalf("bob uploading to alice's lease: %v", err)
	}

	if _, err := client.Do(ctx, a, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, dir)
}

func TestUploadChunksMustContinueTheFile(t *testing.T) {
	f := startUploads(t, fake.NewRunner(), 64<<20, 100<<30)
	ctx := context.Background()
	a := f.dial("alice", "")
	l := leaseFor(t, a)
	chunk := func(in contract.DeviceUploadIn) (contract.DeviceUploadOut, error) {
		in.LeaseID = l.LeaseID
		return client.Do(ctx, a, contract.DeviceUpload, in)
	}
	for _, name := range []string{"", "../x", "a/b", ".hidden", "..", "a..b", "tab\tname", strings.Repeat("a", 200)} {
		if _, err := chunk(contract.DeviceUploadIn{Name: name, Data: []byte("x"), Final: true}); !client.IsCode(err, contract.CodeBadRequest) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	if _, err := chunk(contract.DeviceUploadIn{Name: "big", Data: make([]byte, contract.UploadChunkBytes+1)}); !client.IsCode(err, contract.CodeBadRequest) {
		t.Errorf("oversized chunk: %v", err)
	}
	// A continuing chunk with nothing in flight names offset 0.
	_, err := chunk(contract.DeviceUploadIn{Name: "a.bin", Offset: 5, Data: []byte("x")})
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeBadRequest || !strings.Contains(ce.Message, "expected offset 0") {
		t.Fatalf("offset with nothing in flight: %v", err)
	}
	if out, err := chunk(contract.DeviceUploadIn{Name: "a.bin", Data: []byte("hello ")}); err != nil || out.Complete || out.Received != 6 {
		t.Fatalf("first chunk: %+v %v", out, err)
	}
	_, err = chunk(contract.DeviceUploadIn{Name: "a.bin", Offset: 3, Data: []byte("x")})
	if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeBadRequest || !strings.Contains(ce.Message, "expected offset 6") {
		t.Fatalf("wrong offset: %v", err)
	}
	// In flight, the file is neither visible nor nameable.
	if got := scratchFiles(t, f, l.LeaseID); len(got) != 1 || !strings.HasPrefix(got[0], uploads.PartialPrefix) {
		t.Fatalf("in flight the scratch holds %v", got)
	}
	if _, err := a.Exec(ctx, contract.DeviceExecIn{LeaseID: l.LeaseID, Tool: "fakectl", Args: []string{"{upload:a.bin}"}}, nil); !client.IsCode(err, contract.CodeUnknownUpload) {
		t.Fatalf("exec on a file in flight: %v", err)
	}
	out, err := chunk(contract.DeviceUploadIn{Name: "a.bin", Offset: 6, Data: []byte("world"), Final: true})
	if sum := sha256.Sum256([]byte("hello world")); err != nil || !out.Complete || out.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("final chunk: %+v %v", out, err)
	}
	// A declared size the chunks do not reach keeps nothing.
	if _, err := chunk(contract.DeviceUploadIn{Name: "b.bin", SizeBytes: 10, Data: []byte("short"), Final: true}); !client.IsCode(err, contract.CodeBadRequest) {
		t.Fatalf("short of the declared size: %v", err)
	}
	// Abort drops a file in flight.
	if _, err := chunk(contract.DeviceUploadIn{Name: "c.bin", Data: []byte("part")}); err != nil {
		t.Fatal(err)
	}
	if _, err := chunk(contract.DeviceUploadIn{Name: "c.bin", Abort: true}); err != nil {
		t.Fatal(err)
	}
	if got := scratchFiles(t, f, l.LeaseID); len(got) != 1 || got[0] != "a.bin" {
		t.Fatalf("after the failures the scratch holds %v", got)
	}
}

func TestUploadIsBoundedByTheCapAndTheDiskGuard(t *testing.T) {
	ctx := context.Background()
	t.Run("cap", func(t *testing.T) {
		f := startUploads(t, fake.NewRunner(), 1000, 100<<30)
		a := f.dial("alice", "")
		l := leaseFor(t, a)
		// Declared: refused before anything is written.
		if _, err := a.Upload(ctx, l.LeaseID, "big.bin", bytes.NewReader(make([]byte, 1001))); !client.IsCode(err, contract.CodeUploadTooLarge) {
			t.Fatalf("declared over the cap: %v", err)
		}
		if got := scratchFiles(t, f, l.LeaseID); len(got) != 0 {
			t.Fatalf("a refused upload left %v", got)
		}
		// Undeclared (a pipe): stopped mid-stream, nothing kept.
		if _, err := a.Upload(ctx, l.LeaseID, "big.bin", io.MultiReader(strings.NewReader(strings.Repeat("x", 1001)))); !client.IsCode(err, contract.CodeUploadTooLarge) {
			t.Fatalf("streamed over the cap: %v", err)
		}
		if got := scratchFiles(t, f, l.LeaseID); len(got) != 0 {
			t.Fatalf("a stopped upload left %v", got)
		}
		if _, err := a.Upload(ctx, l.LeaseID, "ok.bin", bytes.NewReader(make([]byte, 1000))); err != nil {
			t.Fatalf("at the cap: %v", err)
		}
	})
	t.Run("disk guard", func(t *testing.T) {
		// 1 MiB is kept free; 1 MiB + 100 bytes are free.
		f := startUploads(t, fake.NewRunner(), 64<<20, 1<<20+100)
		a := f.dial("alice", "")
		l := leaseFor(t, a)
		_, err := a.Upload(ctx, l.LeaseID, "a.bin", bytes.NewReader(make([]byte, 101)))
		if ce := contract.AsError(err); ce == nil || ce.Code != contract.CodeUploadTooLarge || ce.Details["thresholdBytes"] == nil {
			t.Fatalf("over the disk guard: %v", err)
		}
		if _, err := a.Upload(ctx, l.LeaseID, "a.bin", io.MultiReader(bytes.NewReader(make([]byte, 101)))); !client.IsCode(err, contract.CodeUploadTooLarge) {
			t.Fatalf("streamed over the disk guard: %v", err)
		}
		if got := scratchFiles(t, f, l.LeaseID); len(got) != 0 {
			t.Fatalf("refused uploads left %v", got)
		}
		if _, err := a.Upload(ctx, l.LeaseID, "a.bin", bytes.NewReader(make([]byte, 100))); err != nil {
			t.Fatalf("inside the guard: %v", err)
		}
	})
}

func TestUploadScratchGoesWhenTheLeaseEndsMidStream(t *testing.T) {
	f := startUploads(t, fake.NewRunner(), 64<<20, 100<<30)
	ctx := context.Background()
	a := f.dial("alice", "")
	l := leaseFor(t, a)
	if _, err := client.Do(ctx, a, contract.DeviceUpload, contract.DeviceUploadIn{LeaseID: l.LeaseID, Name: "a.bin", Data: []byte("part")}); err != nil {
		t.Fatal(err)
	}
	// Nuke ends every lease, as an expiry or a lost device would.
	if _, err := client.Do(ctx, f.dial("op", f.adminToken()), contract.NukeRun, contract.NukeRunIn{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, filepath.Join(f.home, "uploads", l.LeaseID))
	if _, err := client.Do(ctx, a, contract.DeviceUpload, contract.DeviceUploadIn{LeaseID: l.LeaseID, Name: "a.bin", Offset: 4, Data: []byte("more"), Final: true}); err == nil {
		t.Fatal("a chunk for an ended lease was accepted")
	}
}

func TestUploadRestartSweepsTheUploadsOfLeasesThatDidNotSurvive(t *testing.T) {
	f := startUploads(t, fake.NewRunner(), 64<<20, 100<<30)
	ctx := context.Background()
	a := f.dial("alice", "")
	l := leaseFor(t, a)
	if _, err := a.Upload(ctx, l.LeaseID, "kept.apk", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	f.d.Stop()
	// Left by a lease this home no longer has, and a file cut off mid-stream.
	stale := filepath.Join(f.home, "uploads", "lse_stale")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(f.home, "uploads", l.LeaseID, uploads.PartialPrefix+"half.apk-1")
	if err := os.WriteFile(cut, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Capacity.Strategy, cfg.Capacity.Fixed = "fixed", config.Fixed{MaxRunning: 2, MaxManaged: 2}
	cfg.Capacity.Host.MaxRunning = 8
	cfg.DiskPressure.FreeBytesThreshold = 1 << 20
	d, err := Start(ctx, Options{Home: f.home, Config: cfg, Drivers: []core.Driver{f.drv}, Runner: fake.NewRunner(),
		Stats: &fake.Stats{CPUs: 4, TotalRAM: 16 << 30, FreeRAM: 8 << 30, FreeDisk: 100 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	f.d = d
	a = f.dial("alice", "")
	// A call passes the readiness gate only after the sweep.
	if _, err := client.Do(ctx, a, contract.LeaseGet, contract.LeaseGetIn{LeaseID: l.LeaseID}); err != nil {
		t.Fatalf("the lease did not survive the restart: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("a stale lease's uploads survived the restart: %v", err)
	}
	if _, err := os.Stat(cut); !os.IsNotExist(err) {
		t.Fatalf("a cut-off partial survived the restart: %v", err)
	}
	if got := scratchFiles(t, f, l.LeaseID); len(got) != 1 || got[0] != "kept.apk" {
		t.Fatalf("the surviving lease keeps %v", got)
	}
	// Still watched after the restart: its release removes the directory.
	if _, err := client.Do(ctx, a, contract.LeaseRelease, contract.LeaseReleaseIn{LeaseID: l.LeaseID}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, filepath.Join(f.home, "uploads", l.LeaseID))
}

// The client splits any reader into chunks whatever its length: empty, on
// a chunk boundary, one byte past it; sized or not.
func TestUploadClientSplitsEveryLength(t *testing.T) {
	f := startUploads(t, fake.NewRunner(), 64<<20, 100<<30)
	ctx := context.Background()
	a := f.dial("alice", "")
	l := leaseFor(t, a)
	for _, size := range []int{0, 1, contract.UploadChunkBytes, contract.UploadChunkBytes + 1, 2 * contract.UploadChunkBytes} {
		data := bytes.Repeat([]byte{0xa5}, size)
		for _, sized := range []bool{true, false} {
			var r io.Reader = bytes.NewReader(data)
			if !sized {
				r = io.MultiReader(r)
			}
			out, err := a.Upload(ctx, l.LeaseID, "f.bin", r)
			sum := sha256.Sum256(data)
			if err != nil || !out.Complete || out.Received != int64(size) || out.SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("%d bytes (sized %v): %+v %v", size, sized, out, err)
			}
			if got, err := os.ReadFile(filepath.Join(f.home, "uploads", l.LeaseID, "f.bin")); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%d bytes (sized %v) stored as %d bytes (%v)", size, sized, len(got), err)
			}
		}
	}
}
