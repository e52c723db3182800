package cli

import (
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
)

// --since takes a sequence number, a duration or a time, and refuses
// anything else before a daemon is contacted.
func TestEventsSinceReadsASeqADurationOrATime(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]contract.EventsSubscribeIn{
		"":                     {},
		"120":                  {Since: 120},
		"0":                    {SinceTime: "1970-01-01T00:00:00Z"}, // every event, not this run's only
		"1h":                   {SinceTime: "1h"},
		"7d":                   {SinceTime: "7d"},
		"2026-12-01T09:00:00Z": {SinceTime: "2026-12-01T09:00:00Z"},
	} {
		got, err := eventsSince(in, now)
		if err != nil || got != want {
			t.Errorf("--since %q = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if _, err := eventsSince("an hour ago", now); contract.AsError(err).Code != contract.CodeBadRequest {
		t.Errorf("--since 'an hour ago': %v; want BAD_REQUEST", err)
	}
}
