package simsdk

import (
	"testing"
	"time"
)

func TestDebugTiming(t *testing.T) {
	h := newHarness(t)
	t0 := time.Now()
	u := h.create("A", "iPhone 15", "iOS 17.5")
	t.Log("create", time.Since(t0))
	t0 = time.Now()
	h.must("boot", u)
	t.Log("boot", time.Since(t0))
	t0 = time.Now()
	h.waitState(u, "Booted")
	t.Log("wait", time.Since(t0))
	t0 = time.Now()
	h.must("list", "-j")
	t.Log("list", time.Since(t0))
	t0 = time.Now()
	Reset(h.home)
	t.Log("reset", time.Since(t0))
}
