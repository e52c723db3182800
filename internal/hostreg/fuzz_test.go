package hostreg

import (
	"context"
	"database/sql"
	"testing"
)

// FuzzDecode feeds arbitrary rows to the record decoder. It must never
// panic; whatever it accepts must survive an encode/decode round trip
// unchanged; and a row it refuses must classify as inconsistent even when
// its owner is provably dead, so a corrupt record is never reclaimable.
func FuzzDecode(f *testing.F) {
	f.Add("ios:udid:11111111-2222-3333-4444-555555555555", int64(1), "lease", "", "/h", int64(7), "s", "l", int64(5), "claimed", false, "")
	f.Add("android:avd:a:/r", int64(1), "transient", "erase", "/h", int64(7), "s", "", int64(5), "release-failed", true, `["shutdown"]`)
	f.Add("android:usb:emulator-5554", int64(1), "lease", "", "", int64(-1), "", "", int64(0), "x", true, "null")
	f.Fuzz(func(t *testing.T, key string, ver int64, kind, cmd, home string, pid int64, start, lease string, at int64, state string, hasSteps bool, steps string) {
		r := row{Key: key, RecordVersion: ver, Kind: kind, Command: cmd, Home: home, PID: pid, Start: start,
			LeaseID: lease, ClaimedAtMs: at, State: state, FailedSteps: sql.NullString{String: steps, Valid: hasSteps}}
		c, err := decode(r)
		dead := &fakeProber{}
		if err != nil {
			if st := classify(context.Background(), dead, r); st.Class != ClassInconsistent || st.Reclaimable() {
				t.Fatalf("refused row classified %s", st.Class)
			}
			return
		}
		r2, err := encode(c)
		if err != nil {
			t.Fatalf("decoded claim does not encode: %v", err)
		}
		c2, err := decode(r2)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if c2.Key != c.Key || c2.Owner != c.Owner || c2.Kind != c.Kind || c2.State != c.State ||
			c2.LeaseID != c.LeaseID || c2.Command != c.Command || !c2.ClaimedAt.Equal(c.ClaimedAt) || len(c2.FailedSteps) != len(c.FailedSteps) {
			t.Fatalf("round trip changed the claim: %+v -> %+v", c, c2)
		}
		if st := classify(context.Background(), dead, r); st.Class != ClassOrphaned {
			t.Fatalf("valid row with a dead owner classified %s", st.Class)
		}
	})
}
