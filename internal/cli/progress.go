package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/simlock/simlock/contract"
)

// progressTick is how often a terminal progress line redraws: often enough
// that a person sees it move every second even when no push arrives.
const progressTick = 250 * time.Millisecond

// progressLine shows a lease request's progress on stderr. On a terminal it
// is one line redrawn every tick: the phase, the time spent in it against
// the daemon's estimate (measured on this machine), the total elapsed, and
// the queue position while queued. Queue time is not part of the bar: the
// bar measures the device's work. Off a terminal it prints nothing unless
// --json asked for machine output, then one JSON line per push.
type progressLine struct {
	a     *app
	tty   bool
	start time.Time

	mu         sync.Mutex
	p          contract.Progress
	phaseStart time.Time
	open       bool // a line is drawn and awaits clearing
	done       chan struct{}
	wg         sync.WaitGroup
}

func (a *app) newProgressLine() *progressLine {
	pl := &progressLine{a: a, start: time.Now(), done: make(chan struct{})}
	if f, ok := a.env.Stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		pl.tty = true
	}
	if a.env.StderrTerminal != nil {
		pl.tty = a.env.StderrTerminal()
	}
	if pl.tty {
		pl.wg.Add(1)
		go pl.tick()
	}
	return pl
}

func (pl *progressLine) update(p contract.Progress) {
	if !pl.tty {
		if pl.a.jsonOut {
			b, _ := json.Marshal(map[string]any{"progress": p})
			fmt.Fprintln(pl.a.env.Stderr, string(b))
		}
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if p.Phase != pl.p.Phase || pl.phaseStart.IsZero() {
		pl.phaseStart = time.Now()
	}
	if p.DeviceID == "" && p.Phase == pl.p.Phase {
		p.DeviceID = pl.p.DeviceID
	}
	pl.p = p
	pl.drawLocked(time.Now())
}

func (pl *progressLine) tick() {
	defer pl.wg.Done()
	t := time.NewTicker(progressTick)
	defer t.Stop()
	for {
		select {
		case <-pl.done:
			return
		case now := <-t.C:
			pl.mu.Lock()
			pl.drawLocked(now)
			pl.mu.Unlock()
		}
	}
}

func (pl *progressLine) drawLocked(now time.Time) {
	fmt.Fprintf(pl.a.env.Stderr, "\r\033[K%s", progressText(pl.p, now.Sub(pl.phaseStart), now.Sub(pl.start)))
	pl.open = true
}

// stop ends the ticking and clears the line, so what follows (the grant's
// summary or an error) takes its place.
func (pl *progressLine) stop() {
	if !pl.tty {
		return
	}
	close(pl.done)
	pl.wg.Wait()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.open {
		fmt.Fprint(pl.a.env.Stderr, "\r\033[K")
		pl.open = false
	}
}

// progressText renders one progress line. inPhase is the time since the
// current phase began, elapsed the time since the request was sent.
func progressText(p contract.Progress, inPhase, elapsed time.Duration) string {
	phase := p.Phase
	if phase == "" {
		phase = "requesting"
	}
	var b strings.Builder
	if p.Phase == "queued" {
		fmt.Fprintf(&b, "queued")
		if p.QueuePosition > 0 {
			fmt.Fprintf(&b, " at position %d", p.QueuePosition)
		}
		fmt.Fprintf(&b, ", waiting %s", short(inPhase))
	} else {
		if eta := time.Duration(p.EtaMs) * time.Millisecond; eta > 0 {
			frac := min(float64(inPhase)/float64(eta), 1)
			n := int(frac * 20)
			b.WriteString("[" + strings.Repeat("=", n) + strings.Repeat(" ", 20-n) + "] ")
			left := eta - inPhase
			fmt.Fprintf(&b, "%s %s", phase, short(inPhase))
			if left > 0 {
				fmt.Fprintf(&b, ", about %s left", short(left))
			} else {
				fmt.Fprintf(&b, ", taking longer than the usual %s", short(eta))
			}
		} else {
			fmt.Fprintf(&b, "%s %s", phase, short(inPhase))
		}
		if p.DeviceID != "" {
			fmt.Fprintf(&b, " (%s)", p.DeviceID)
		}
	}
	fmt.Fprintf(&b, " · %s elapsed", short(elapsed))
	return b.String()
}

// short rounds a duration for a person: tenths of a second below a minute.
func short(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// grantSummary is the one line a person reads when a lease is granted.
func grantSummary(l contract.Lease, now time.Time) string {
	what := l.DeviceID
	id := ""
	if d := l.Device; d != nil {
		what = strings.TrimSpace(d.Model + " " + d.OSVersion)
		if d.Name != "" && what == "" {
			what = d.Name
		}
		switch {
		case d.UDID != "":
			id = " udid " + d.UDID
		case d.Serial != "":
			id = " serial " + d.Serial
		}
	}
	left := l.ExpiresAt.Sub(now).Round(time.Second)
	s := fmt.Sprintf("simlock: leased %s (%s%s) as %s, expires %s (in %s, renewed while this runs)",
		what, l.DeviceID, id, l.LeaseID, l.ExpiresAt.Local().Format("15:04:05"), left)
	if l.Worker != nil {
		s += " on worker " + l.Worker.ID
	}
	return s
}
