package hostreg

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestHomeRecordRoundTripAndRefusals(t *testing.T) {
	dir := t.TempDir()
	r := HomeRecord{Home: "/tmp/h", PID: 4242, Start: "linux:b:123", StartedAt: 5,
		Roots: map[string]string{"ios": "/tmp/h/ios"}, Registry: "1:2"}
	path := HomeRecordPath(dir, r.Home)
	if err := WriteHomeRecord(path, r); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("record file %v %v, want mode 0600", st, err)
	}
	got, err := ReadHomeRecord(path)
	r.SchemaVersion = homeRecordVersion
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("read back %+v, %v; want %+v", got, err, r)
	}
	// A second home gets its own file; a bad file is reported, not hidden.
	if err := WriteHomeRecord(HomeRecordPath(dir, "/tmp/g"), HomeRecord{Home: "/tmp/g", PID: 7, Start: "s"}); err != nil {
		t.Fatal(err)
	}
	badPath := filepath.Join(dir, HomesDir, "junk.json")
	os.WriteFile(badPath, []byte("{"), 0o600)
	recs, bad, err := HomeRecords(dir)
	if err != nil || len(recs) != 2 || recs[0].Home != "/tmp/g" || recs[1].Home != "/tmp/h" || bad[badPath] == nil || len(bad) != 1 {
		t.Fatalf("HomeRecords: %+v %v %v", recs, bad, err)
	}
	for name, b := range map[string]string{
		"unknown field":   `{"schemaVersion":1,"home":"/h","pid":7,"start":"s","startedAt":0,"x":1}`,
		"other version":   `{"schemaVersion":2,"home":"/h","pid":7,"start":"s","startedAt":0}`,
		"relative home":   `{"schemaVersion":1,"home":"h","pid":7,"start":"s","startedAt":0}`,
		"unclean home":    `{"schemaVersion":1,"home":"/h/../g","pid":7,"start":"s","startedAt":0}`,
		"pid 1":           `{"schemaVersion":1,"home":"/h","pid":1,"start":"s","startedAt":0}`,
		"no start":        `{"schemaVersion":1,"home":"/h","pid":7,"start":"","startedAt":0}`,
		"relative root":   `{"schemaVersion":1,"home":"/h","pid":7,"start":"s","startedAt":0,"roots":{"ios":"r"}}`,
		"trailing object": `{"schemaVersion":1,"home":"/h","pid":7,"start":"s","startedAt":0}{}`,
		"huge":            `{"schemaVersion":1,"home":"/h","pid":7,"start":"s","startedAt":0,"registry":"` + strings.Repeat("x", maxHomeRecord) + `"}`,
	} {
		if _, err := DecodeHomeRecord([]byte(b)); err == nil {
			t.Errorf("%s: accepted %q", name, b[:min(len(b), 80)])
		}
	}
}

// FuzzDecodeHomeRecord: the decoder never panics, and whatever it accepts
// encodes and decodes back to the same record, with a home and roots that
// are clean absolute paths and a pid that could be a daemon's.
func FuzzDecodeHomeRecord(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":1,"home":"/h","pid":4242,"start":"linux:b:1","startedAt":5,"roots":{"ios":"/h/ios"},"registry":"1:2"}`))
	f.Add([]byte(`{"schemaVersion":1,"home":"/h","pid":7,"start":"darwin:1.000001","startedAt":0}`))
	f.Add([]byte(`{"schemaVersion":1,"home":"/","pid":2,"start":"s","startedAt":0,"roots":{}}`))
	f.Add([]byte(`{"schemaVersion":1,"home":"/h","pid":0,"start":"s"}`))
	f.Add([]byte(`{"schemaVersion":1,"home":"/h","pid":7,"start":"s","startedAt":0} `))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeHomeRecord(b)
		if err != nil {
			return
		}
		if !filepath.IsAbs(r.Home) || filepath.Clean(r.Home) != r.Home || r.PID <= 1 || r.Start == "" {
			t.Fatalf("accepted an unusable record %+v", r)
		}
		for _, root := range r.Roots {
			if !filepath.IsAbs(root) {
				t.Fatalf("accepted a relative root %+v", r)
			}
		}
		enc, err := EncodeHomeRecord(r)
		if err != nil {
			t.Fatalf("accepted record does not encode: %v", err)
		}
		r2, err := DecodeHomeRecord(enc)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip: %+v -> %+v (%v)", r, r2, err)
		}
	})
}
