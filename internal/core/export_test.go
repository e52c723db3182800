package core

// ReceiptMemory counts the receipts the engine keeps in memory and, among
// them, the settled ones that still hold an admission's live state (its
// context, subscribers, progress, timing clock or outcome with its grant), for the
// bounded-growth tests in core_test.
func (e *Engine) ReceiptMemory() (receipts, settledLive int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, rq := range e.reqs.byID {
		receipts++
		if !rq.rec.State.Terminal() {
			continue
		}
		rq.mu.Lock()
		live := rq.cancel != nil || rq.timing != nil || rq.downloaded != nil || rq.subs != nil || rq.last != nil || rq.out != nil
		rq.mu.Unlock()
		if live {
			settledLive++
		}
	}
	return receipts, settledLive
}

// GoldenRefusals is GoldenStatus's refusals keyed by spec key, for the
// tests' lookups.
func (gd GoldenDesk) GoldenRefusals() map[string]string {
	out := map[string]string{}
	for _, r := range gd.GoldenStatus().Refused {
		out[r.Key] = r.Reason
	}
	return out
}

// ResetProbeIdle is how long a spec must have had no grant before a reset
// probe may run on its only device (ADR 0093).
const ResetProbeIdle = resetProbeIdle
