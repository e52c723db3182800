package hostreg

import (
	"testing"
	"time"

	"github.com/simlock/simlock/contract"
)

// A slot release's callers wait contract.SlotReleaseReplyBudgetMs, which
// counts on the registry write waiting no longer than busyTimeout behind
// another daemon; a longer busy timeout would let a caller give up on a
// release the daemon then completes.
func TestSlotReleaseBudgetCoversTheRegistryBusyTimeout(t *testing.T) {
	room := time.Duration(contract.SlotReleaseReplyBudgetMs-contract.SlotReleaseSettleWaitMs) * time.Millisecond
	if busyTimeout+time.Second > room {
		t.Fatalf("busy timeout %s leaves less than a second of the %s a slot release's caller allows beyond the settle wait", busyTimeout, room)
	}
}
