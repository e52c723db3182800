package fake

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/simlock/simlock/internal/ports"
)

// Step is one scripted process invocation.
type Step struct {
	// Match is the expected command line ("xcrun simctl --set /r list -j").
	// A trailing "*" matches any suffix.
	Match    string
	Stdout   string
	Stderr   string
	ExitCode int
	Err      error // returned instead of running (e.g. exec not found)
	// Do, when set, runs before the result is returned (to block, or to
	// mutate test state).
	Do func(ctx context.Context, cmd ports.Command) error
}

// Runner is a ports.ProcessRunner that replays scripted steps. Scripted
// steps are consumed in order; a command that matches no remaining step is
// looked up in the standing responses; otherwise it fails the test run via
// Unexpected.
type Runner struct {
	mu       sync.Mutex
	steps    []Step
	standing []Step
	Calls    []string
	// Unexpected collects command lines no step matched.
	Unexpected []string
}

// NewRunner returns a runner that replays steps in order.
func NewRunner(steps ...Step) *Runner { return &Runner{steps: steps} }

// Expect appends scripted steps.
func (r *Runner) Expect(steps ...Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, steps...)
}

// Always registers a response for any number of matching calls.
func (r *Runner) Always(s Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.standing = append(r.standing, s)
}

// Remaining reports scripted steps not yet consumed.
func (r *Runner) Remaining() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.steps {
		out = append(out, s.Match)
	}
	return out
}

// CommandLine renders a command the way Step.Match spells it.
func CommandLine(c ports.Command) string {
	return strings.TrimSpace(c.Name + " " + strings.Join(c.Args, " "))
}

func matches(pattern, line string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(line, p)
	}
	return pattern == line
}

func (r *Runner) Run(ctx context.Context, c ports.Command) (ports.Result, error) {
	line := CommandLine(c)
	r.mu.Lock()
	r.Calls = append(r.Calls, line)
	var step *Step
	for i := range r.steps {
		if matches(r.steps[i].Match, line) {
			s := r.steps[i]
			r.steps = append(r.steps[:i:i], r.steps[i+1:]...)
			step = &s
			break
		}
	}
	if step == nil {
		for i := range r.standing {
			if matches(r.standing[i].Match, line) {
				s := r.standing[i]
				step = &s
				break
			}
		}
	}
	if step == nil {
		r.Unexpected = append(r.Unexpected, line)
		r.mu.Unlock()
		return ports.Result{ExitCode: 127}, fmt.Errorf("fake runner: unexpected command %q", line)
	}
	r.mu.Unlock()
	if step.Do != nil {
		if err := step.Do(ctx, c); err != nil {
			return ports.Result{ExitCode: -1}, err
		}
	}
	if step.Err != nil {
		return ports.Result{ExitCode: -1}, step.Err
	}
	res := ports.Result{Stdout: []byte(step.Stdout), Stderr: []byte(step.Stderr), ExitCode: step.ExitCode}
	if c.Stdout != nil {
		c.Stdout.Write(res.Stdout)
	}
	if c.Stderr != nil {
		c.Stderr.Write(res.Stderr)
	}
	if step.ExitCode != 0 {
		return res, &ports.ExitError{Command: c, Result: res}
	}
	return res, nil
}
