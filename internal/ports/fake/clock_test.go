package fake

import (
	"testing"
	"time"
)

func TestTimersFireInDeadlineOrderOnlyOnAdvance(t *testing.T) {
	c := NewClock(time.Unix(1000, 0))
	var fired []string
	c.AfterFunc(2*time.Second, func() { fired = append(fired, "b") })
	c.AfterFunc(time.Second, func() { fired = append(fired, "a") })
	stop := c.AfterFunc(1500*time.Millisecond, func() { fired = append(fired, "never") })
	stop.Stop()
	ch := c.After(3 * time.Second)
	c.Advance(999 * time.Millisecond)
	if len(fired) != 0 {
		t.Fatal("fired early")
	}
	c.Advance(2 * time.Second)
	if len(fired) != 2 || fired[0] != "a" || fired[1] != "b" {
		t.Fatalf("fired %v", fired)
	}
	select {
	case <-ch:
		t.Fatal("After fired early")
	default:
	}
	c.Advance(time.Second)
	if got := <-ch; !got.Equal(time.Unix(1003, 0)) {
		t.Fatalf("After delivered %v", got)
	}
}

func TestTimerArmedDuringAdvanceFiresInTheSameAdvance(t *testing.T) {
	c := NewClock(time.Unix(0, 0))
	n := 0
	c.AfterFunc(time.Second, func() {
		n++
		c.AfterFunc(time.Second, func() { n++ })
	})
	c.Advance(5 * time.Second)
	if n != 2 {
		t.Fatalf("n=%d", n)
	}
}
