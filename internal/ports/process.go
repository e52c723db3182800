package ports

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Command describes one external program invocation.
type Command struct {
	Name  string   // program name, looked up on PATH
	Args  []string // arguments, without the program name
	Env   []string // extra KEY=VALUE entries appended to the daemon's environment
	Dir   string
	Stdin io.Reader
	// Stdout and Stderr, when set, receive output as it is produced and the
	// Result keeps only the last TailBytes of that stream, for diagnostics:
	// a long-running or chatty program (an exec'd command, a supervised
	// emulator) must not grow the daemon's memory with its output. A writer
	// that blocks holds the program back (the pipe fills and its writes
	// wait); it must return once the command's context is done, because Run
	// waits for the last write. When nil, the stream is captured whole.
	Stdout io.Writer
	Stderr io.Writer
}

// TailBytes is how much of a streamed stream a Result keeps.
const TailBytes = 4 << 10

// Result is what a finished command produced: each stream whole, or its last
// TailBytes when the Command streamed it to a writer.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
}

// ExitError reports a command that ran but exited non-zero.
type ExitError struct {
	Command Command
	Result  Result
}

func (e *ExitError) Error() string {
	msg := string(bytes.TrimSpace(e.Result.Stderr))
	if msg == "" {
		msg = string(bytes.TrimSpace(e.Result.Stdout))
	}
	if len(msg) > 600 {
		msg = msg[:600] + "…"
	}
	return e.Command.Name + " " + firstArg(e.Command.Args) + ": exit status " + itoa(e.Result.ExitCode) + ": " + msg
}

func firstArg(a []string) string {
	if len(a) == 0 {
		return ""
	}
	if len(a) > 1 && a[0] == "simctl" {
		return a[0] + " " + a[1]
	}
	return a[0]
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	neg := i < 0
	if neg {
		i = -i
	}
	var b [20]byte
	p := len(b)
	for i > 0 {
		p--
		b[p] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		p--
		b[p] = '-'
	}
	return string(b[p:])
}

// ProcessRunner runs external programs. Run waits for the program to finish;
// a non-zero exit is reported as *ExitError with the captured output (or its
// tail, for a streamed stream).
// Cancelling ctx terminates the whole process group (SIGTERM, then SIGKILL
// after a grace period).
type ProcessRunner interface {
	Run(ctx context.Context, cmd Command) (Result, error)
}

// ExecRunner is the real ProcessRunner over os/exec.
type ExecRunner struct {
	// Grace is how long a cancelled command gets between SIGTERM and SIGKILL.
	Grace time.Duration
}

func (r ExecRunner) Run(ctx context.Context, c Command) (Result, error) {
	cmd := exec.Command(c.Name, c.Args...)
	cmd.Dir = c.Dir
	if len(c.Env) > 0 {
		cmd.Env = append(os.Environ(), c.Env...)
	}
	cmd.Stdin = c.Stdin
	stdout, stderr := sink(c.Stdout), sink(c.Stderr)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A process group of its own, so cancellation reaches grandchildren too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	grace := r.Grace
	if grace <= 0 {
		grace = 3 * time.Second
	}
	// A descendant that left the group and still holds a pipe must not keep
	// Run waiting once the program itself has exited.
	cmd.WaitDelay = grace
	if err := cmd.Start(); err != nil {
		return Result{ExitCode: -1}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		// The exit status of a process we killed says nothing the
		// caller needs: the context's error is the answer.
		select {
		case <-done:
		case <-time.After(grace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: -1}
		return res, ctx.Err()
	}
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if errors.Is(err, exec.ErrWaitDelay) {
		// The program exited; only a stray descendant's pipe was cut.
		err = nil
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			res.ExitCode = code
			return res, &ExitError{Command: c, Result: res}
		}
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			res.ExitCode = ee.ExitCode()
			return res, &ExitError{Command: c, Result: res}
		}
		res.ExitCode = -1
		return res, err
	}
	return res, nil
}

// output is where one stream of a running command goes: a whole capture,
// or the caller's writer plus a bounded tail.
type output interface {
	io.Writer
	Bytes() []byte
}

func sink(w io.Writer) output {
	if w == nil {
		return &bytes.Buffer{}
	}
	return &streamed{w: w, tail: NewTail(TailBytes)}
}

type streamed struct {
	w    io.Writer
	tail *Tail
}

func (s *streamed) Write(p []byte) (int, error) {
	s.tail.Write(p)
	return s.w.Write(p)
}

func (s *streamed) Bytes() []byte { return s.tail.Bytes() }

// Tail is an io.Writer that keeps only the last bytes written to it, safe
// for concurrent use (stdout and stderr may share one).
type Tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

// NewTail returns a Tail keeping at most max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		// Shift in place: the buffer never grows past max.
		t.buf = t.buf[:copy(t.buf, t.buf[over:])]
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes returns a copy of what the tail holds.
func (t *Tail) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}
