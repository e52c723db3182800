package android

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/simlock/simlock/internal/core"
	"github.com/simlock/simlock/internal/ports"
)

var (
	errEmulatorExited = errors.New("emulator process exited")
	errClosed         = errors.New("android driver is closed")
)

// bootMode is how an emulator launch treats the AVD's disk.
type bootMode int

const (
	// bootCold boots the data partition as it is, ignoring snapshots.
	bootCold bootMode = iota
	// bootBaseline restores the clean baseline snapshot while booting.
	bootBaseline
	// bootWipe erases the data partition first (the reclaim fallback).
	bootWipe
)

func (m bootMode) String() string {
	switch m {
	case bootBaseline:
		return "baseline"
	case bootWipe:
		return "wipe-data"
	default:
		return "cold"
	}
}

// baselineSnapshot is the name of the immutable clean snapshot. Automatic
// snapshot saving stays off (-no-snapshot-save) so nothing overwrites it.
const baselineSnapshot = "simlock-baseline"

// emulatorProc is one emulator the driver launched. ProcessRunner.Run
// blocks until the program exits, so each emulator runs in a goroutine the
// driver owns; done closes once Run has returned, which is the proof that
// the process is gone.
type emulatorProc struct {
	name   string
	port   int
	mode   bootMode
	cancel context.CancelFunc
	done   chan struct{}

	// output keeps the emulator's last words for diagnostics. An emulator
	// can run for days; its whole output must not live in the daemon.
	output *ports.Tail

	mu       sync.Mutex
	stopping bool // simlock asked it to exit; an exit otherwise is a crash
	err      error
}

// emulatorTailBytes is how much of an emulator's combined output is kept.
const emulatorTailBytes = 16 << 10

func (p *emulatorProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *emulatorProc) markStopping() {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
}

func (p *emulatorProc) wasStopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopping
}

// exitError describes an emulator that exited while simlock waited on it.
func (p *emulatorProc) exitError() error {
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	out := p.output.Bytes()
	if emulatorUnknownAVD(out) {
		return fmt.Errorf("emulator does not know AVD %s: %w", p.name, core.ErrDeviceNotFound)
	}
	msg := string(bytes.TrimSpace(tail(out, 800)))
	if err != nil {
		return fmt.Errorf("emulator for %s exited during boot (%v): %s", p.name, err, msg)
	}
	return fmt.Errorf("emulator for %s exited during boot: %s", p.name, msg)
}

func tail(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return b[len(b)-n:]
}

// proc returns the supervised emulator for name, if one was launched.
func (d *Driver) proc(name string) *emulatorProc {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.procs[name]
}

// launch starts the emulator for name as a supervised child. Its context
// derives from the driver's, not the caller's: the emulator outlives the
// call that started it and ends on Shutdown, Destroy or Close.
func (d *Driver) launch(name string, port int, mode bootMode) (*emulatorProc, error) {
	args := []string{"-avd", name, "-port", strconv.Itoa(port), "-no-window"}
	if d.noAudio {
		// Headless is about the window only: audio follows the AVD
		// (hw.audioInput/hw.audioOutput) unless the operator turned it off.
		args = append(args, "-no-audio")
	}
	args = append(args, "-no-boot-anim", "-no-snapshot-save")
	switch mode {
	case bootBaseline:
		args = append(args, "-snapshot", baselineSnapshot)
	case bootCold:
		args = append(args, "-no-snapshot-load")
	case bootWipe:
		args = append(args, "-wipe-data", "-no-snapshot-load")
	}
	cmd := d.command(d.tools.Emulator, args...)
	// Both streams go to one bounded tail, in the order they arrive.
	output := ports.NewTail(emulatorTailBytes)
	cmd.Stdout, cmd.Stderr = output, output

	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, errClosed
	}
	if p := d.procs[name]; p != nil && p.alive() {
		d.mu.Unlock()
		return nil, fmt.Errorf("android driver: emulator for %s is already running", name)
	}
	ctx, cancel := context.WithCancel(d.base)
	p := &emulatorProc{name: name, port: port, mode: mode, cancel: cancel, done: make(chan struct{}), output: output}
	d.procs[name] = p
	d.running.Add(1)
	d.mu.Unlock()

	d.log.Info("launching emulator", "avd", name, "port", port, "mode", mode.String())
	go func() {
		defer d.running.Done()
		defer cancel()
		_, err := d.runner.Run(ctx, cmd)
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		if p.wasStopping() {
			// An exit simlock asked for: the next boot may trust the
			// baseline again. Written before done closes, so whoever waits
			// on done sees it.
			if err := d.updateState(name, func(s *avdState) { s.Running = false }); err != nil {
				d.log.Warn("record emulator stop", "avd", name, "err", err)
			}
		} else {
			d.log.Warn("emulator exited on its own", "avd", name, "err", err,
				"output", string(bytes.TrimSpace(tail(output.Bytes(), 400))))
		}
		// Its ports are the AVD's until it is deleted: hold them again,
		// before done closes, so a Destroy waiting on done lets go of
		// them after this.
		if d.isMember(name) {
			d.holdExited(name, port)
		}
		close(p.done)
	}()
	return p, nil
}

// stopProc asks a supervised emulator to exit through its console, and
// proves it did by waiting for its Run to return. An emulator that ignores
// the request for the grace period, or whose console is unreachable, is
// signalled through its context (SIGTERM, then SIGKILL).
func (d *Driver) stopProc(ctx context.Context, p *emulatorProc) error {
	p.markStopping()
	if p.alive() {
		if _, err := d.adbOn(ctx, serialFor(p.port), "emu", "kill"); err != nil {
			d.log.Info("emu kill failed; signalling the emulator", "avd", p.name, "err", err)
			p.cancel()
		} else if err := d.sleep(ctx, d.grace, p.done); err == nil {
			d.log.Warn("emulator ignored emu kill; signalling it", "avd", p.name, "grace", d.grace)
			p.cancel()
		} else if !errors.Is(err, errEmulatorExited) {
			return fmt.Errorf("android driver: waiting for %s to exit: %w", p.name, err)
		}
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("android driver: %s has not exited: %w", p.name, ctx.Err())
	}
}
