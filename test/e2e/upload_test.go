package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// uploadFleet is a gateway with one worker that can run an emulator and a
// simulator at once, with a 60 MiB upload cap and a disk guard that a test
// machine's disk does not trip.
func uploadFleet(t *testing.T) (gw, worker *world, base string) {
	t.Helper()
	gw, _, base = fleet(t, 0)
	var join struct{ Token string }
	gw.json(&join, "token", "create", "--role", "worker", "--name", "upload-join", "--json")
	worker = newWorld(t, "")
	cfg := fmt.Sprintf(`{"capacity":{"strategy":"fixed","fixed":{"maxRunning":2,"maxManaged":3}},
 "diskPressure":{"freeBytesThreshold":1048576}, "upload":{"maxBytes":62914560},
 "gateway":{"url":"ws://%s","token":%q,"label":"mac-1"}}`, strings.TrimPrefix(base, "http://"), join.Token)
	if err := os.WriteFile(filepath.Join(worker.home, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	worker.mustRun("daemon", "start")
	eventually(t, "the worker to join", 30*time.Second, func() bool {
		ws := gw.workers()
		return len(ws) == 1 && ws[0].State == "connected"
	})
	return gw, worker, base
}

// writeFile makes a file of size bytes of a repeating pattern.
func writeFile(t *testing.T, path string, size int) {
	t.Helper()
	pattern := []byte("simlock upload e2e \x00\x01\x02\xff")
	b := bytes.Repeat(pattern, size/len(pattern)+1)[:size]
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestUploadThroughAGatewayInstallsOnTheWorkersEmulator(t *testing.T) {
	gw, worker, base := uploadFleet(t)
	var tok struct{ Token string }
	gw.json(&tok, "token", "create", "--role", "agent", "--name", "ci", "--json")
	remote := func(args ...string) []string { return append([]string{"--url", base, "--token", tok.Token}, args...) }

	var l lease
	gw.json(&l, remote("lease", "--platform", "android", "--model", "pixel_6", "--detach")...)
	_, workerLease, ok := strings.Cut(l.LeaseID, ".")
	if !ok {
		t.Fatalf("gateway lease id %q", l.LeaseID)
	}
	scratch := filepath.Join(worker.home, "uploads", workerLease)

	// 50 MB up through the gateway, then installed on the worker's emulator
	// (the simulated adb names the package after the file).
	dir := t.TempDir()
	apk := filepath.Join(dir, "com.example.big.apk")
	writeFile(t, apk, 50<<20)
	start := time.Now()
	out := gw.mustRun(remote("exec", l.LeaseID, "--upload", apk, "--", "adb", "install", "{upload:com.example.big.apk}")...)
	t.Logf("50 MiB upload + install through the gateway: %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out, "Success") {
		t.Fatalf("adb install through the gateway: %s", out)
	}
	if out := gw.mustRun(remote("exec", l.LeaseID, "--", "adb", "shell", "pm", "list", "packages")...); !strings.Contains(out, "package:com.example.big") {
		t.Fatalf("pm list packages after the install: %s", out)
	}
	if fi, err := os.Stat(filepath.Join(scratch, "com.example.big.apk")); err != nil || fi.Size() != 50<<20 {
		t.Fatalf("the worker's scratch copy: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(gw.home, "uploads")); !os.IsNotExist(err) {
		t.Fatalf("the gateway stored the upload itself: %v", err)
	}

	// The gateway's own socket sends the file as device.upload chunks,
	// forwarded over the uplink one at a time.
	small := filepath.Join(dir, "com.example.small.apk")
	writeFile(t, small, 3<<20+7)
	if out := gw.mustRun("exec", l.LeaseID, "--upload", small, "--", "adb", "install", "{upload:com.example.small.apk}"); !strings.Contains(out, "Success") {
		t.Fatalf("adb install of a chunked upload: %s", out)
	}
	if fi, err := os.Stat(filepath.Join(scratch, "com.example.small.apk")); err != nil || fi.Size() != 3<<20+7 {
		t.Fatalf("the chunked upload on the worker: %v %v", fi, err)
	}

	// An unknown name never starts the command.
	if r := gw.run(remote("exec", l.LeaseID, "--", "adb", "install", "{upload:nope.apk}")...); r.code != 8 || !strings.Contains(r.stderr, "UNKNOWN_UPLOAD") {
		t.Fatalf("unknown upload: %d %s", r.code, r.stderr)
	}

	// Over the cap: refused (declared by the CLI, streamed by a chunked
	// PUT), with nothing left behind.
	big := filepath.Join(dir, "big.bin")
	writeFile(t, big, 60<<20+1)
	if r := gw.run(remote("exec", l.LeaseID, "--upload", big, "--", "adb", "install", "{upload:big.bin}")...); r.code != 11 || !strings.Contains(r.stderr, "UPLOAD_TOO_LARGE") {
		t.Fatalf("over the cap: %d %s", r.code, r.stderr)
	}
	f, err := os.Open(big)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PUT", base+"/v1/leases/"+l.LeaseID+"/uploads/big.bin", io.MultiReader(f))
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	resp, err := http.DefaultClient.Do(req)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), "UPLOAD_TOO_LARGE") {
		t.Fatalf("chunked PUT over the cap: %d %s", resp.StatusCode, b)
	}
	if ents, _ := os.ReadDir(scratch); len(ents) != 2 || ents[0].Name() != "com.example.big.apk" || ents[1].Name() != "com.example.small.apk" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("after the refusals the scratch holds %v", names)
	}

	// Release: the scratch directory goes with the lease.
	gw.mustRun(remote("release", l.LeaseID)...)
	eventually(t, "the scratch directory to go", 10*time.Second, func() bool {
		_, err := os.Stat(scratch)
		return os.IsNotExist(err)
	})
}

func TestUploadInFlightDoesNotStallAnotherLease(t *testing.T) {
	gw, worker, base := uploadFleet(t)
	var a, b struct{ Token string }
	gw.json(&a, "token", "create", "--role", "agent", "--name", "uploader", "--json")
	gw.json(&b, "token", "create", "--role", "agent", "--name", "other", "--json")
	var l lease
	gw.json(&l, "--url", base, "--token", a.Token, "lease", "--platform", "android", "--model", "pixel_6", "--detach")

	// An upload whose sender has sent 2 MiB and then stalls mid-file.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PUT", base+"/v1/leases/"+l.LeaseID+"/uploads/slow.bin", pr)
	req.Header.Set("Authorization", "Bearer "+a.Token)
	type answer struct {
		code int
		body string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- answer{code: resp.StatusCode, body: string(body)}
	}()
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for i := 0; i < 3; i++ {
		if _, err := pw.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	_, workerLease, _ := strings.Cut(l.LeaseID, ".")
	eventually(t, "the upload to reach the worker", 10*time.Second, func() bool {
		ents, _ := os.ReadDir(filepath.Join(worker.home, "uploads", workerLease))
		return len(ents) == 1 && strings.HasPrefix(ents[0].Name(), ".partial-")
	})

	// Meanwhile another agent gets a device through the same gateway.
	start := time.Now()
	var other lease
	gw.json(&other, "--url", base, "--token", b.Token, "lease", "--platform", "ios", "--model", "iPhone 16", "--detach", "--timeout", "20s")
	if other.LeaseID == "" {
		t.Fatal("no lease for the other agent")
	}
	t.Logf("another agent's lease while an upload was in flight: %s", time.Since(start).Round(time.Millisecond))
	select {
	case ans := <-done:
		t.Fatalf("the stalled upload ended early: %+v", ans)
	default:
	}

	// The sender resumes and finishes: the file is whole.
	if _, err := pw.Write(chunk); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	ans := <-done
	if ans.err != nil || ans.code != 200 || !strings.Contains(ans.body, `"received":4194304`) {
		t.Fatalf("the resumed upload: %+v", ans)
	}
}
