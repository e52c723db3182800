package gateway

import (
	"context"
	"testing"

	"github.com/simlock/simlock/contract"
)

func TestUploadChunksAreForwardedInOrderToTheLeasesWorker(t *testing.T) {
	h := newHarness(t)
	a := newFakeWorker("wa", h.clock)
	a.uploadCap = 5
	h.attach(a)
	l := h.lease(agent("alice"), contract.LeaseRequestIn{Platform: "ios"})
	upload := func(s contract.Session, in contract.DeviceUploadIn) (contract.DeviceUploadOut, *contract.Error) {
		var out contract.DeviceUploadOut
		err := h.do(context.Background(), s, contract.DeviceUpload.Name, in, &out, nil)
		return out, err
	}
	if _, err := upload(agent("alice"), contract.DeviceUploadIn{LeaseID: l.LeaseID, Name: "a.apk", Data: []byte("abc")}); err != nil {
		t.Fatal(err)
	}
	out, err := upload(agent("alice"), contract.DeviceUploadIn{LeaseID: l.LeaseID, Name: "a.apk", Offset: 3, Data: []byte("de"), Final: true})
	if err != nil || !out.Complete || out.Received != 5 {
		t.Fatalf("final chunk: %+v %v", out, err)
	}
	// The worker's answer, refusal included, comes back unchanged.
	_, err = upload(agent("alice"), contract.DeviceUploadIn{LeaseID: l.LeaseID, Name: "b.apk", Data: []byte("abcdef")})
	code(t, err, contract.CodeUploadTooLarge)
	// Another agent never reaches the worker.
	_, err = upload(agent("bob"), contract.DeviceUploadIn{LeaseID: l.LeaseID, Name: "a.apk", Data: []byte("x")})
	code(t, err, contract.CodeForbidden)
	want := []string{
		"device.upload lse_1 a.apk off=0 len=3 final=false",
		"device.upload lse_1 a.apk off=3 len=2 final=true",
		"device.upload lse_1 b.apk off=0 len=6 final=false",
	}
	got := a.called("device.upload")
	if len(got) != len(want) {
		t.Fatalf("worker saw %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("call %d: %q, want %q", i, got[i], want[i])
		}
	}
}
