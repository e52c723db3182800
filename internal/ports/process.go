package ports

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
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
	// Stdout and Stderr, when set, receive output as it is produced in
	// addition to it being captured in the Result.
	Stdout io.Writer
	Stderr io.Writer
}

// Result is what a finished command produced.
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
// a non-zero exit is reported as *ExitError with the captured output.
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
	var stdout, stderr bytes.Buffer
	cmd.Stdout = teeTo(&stdout, c.Stdout)
	cmd.Stderr = teeTo(&stderr, c.Stderr)
	// A process group of its own, so cancellation reaches grandchildren too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return Result{ExitCode: -1}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		grace := r.Grace
		if grace <= 0 {
			grace = 3 * time.Second
		}
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

func teeTo(buf *bytes.Buffer, w io.Writer) io.Writer {
	if w == nil {
		return buf
	}
	return io.MultiWriter(buf, w)
}
