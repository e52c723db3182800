package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// timingsKey is the meta row holding the engine's measured driver
// timings: a handful of figures, rewritten whole after each measurement.
const timingsKey = "timings"

// LoadTimings returns the measured driver timings an earlier run saved
// (none on a new home), so the first ETA after a start is this home's.
func (db *DB) LoadTimings(ctx context.Context) (map[string]time.Duration, error) {
	v, ok, err := db.GetMeta(ctx, timingsKey)
	if err != nil || !ok {
		return nil, err
	}
	var ms map[string]int64
	if err := json.Unmarshal([]byte(v), &ms); err != nil {
		return nil, fmt.Errorf("store: decode timings: %w", err)
	}
	out := make(map[string]time.Duration, len(ms))
	for k, m := range ms {
		out[k] = time.Duration(m) * time.Millisecond
	}
	return out, nil
}

// SaveTimings replaces the saved timings, in milliseconds (what an ETA
// shows).
func (db *DB) SaveTimings(ctx context.Context, timings map[string]time.Duration) error {
	ms := make(map[string]int64, len(timings))
	for k, d := range timings {
		ms[k] = d.Milliseconds()
	}
	b, err := json.Marshal(ms)
	if err != nil {
		return fmt.Errorf("store: encode timings: %w", err)
	}
	return db.SetMeta(ctx, timingsKey, string(b))
}
