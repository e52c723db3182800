package mcp

import (
	"errors"
	"os"
	"strings"
	"syscall"

	"github.com/simlock/simlock/contract"
)

// SlotConfigEnv is the environment variable that carries a managed slot's
// launch configuration when --slot-config is not given.
const SlotConfigEnv = "SIMLOCK_SLOT_CONFIG"

// SlotConfigSource is where a launch configuration came from, for messages.
type SlotConfigSource struct {
	// From is "--slot-config" or SlotConfigEnv.
	From string
	// Path is the file read, empty for inline JSON.
	Path string
}

// ReadSlotConfig picks the launch configuration's text: the flag wins over
// the environment; a value starting with "{" is the JSON itself, anything
// else a file path. ok is false when neither carries a value. Nothing here
// reaches a daemon or a device.
func ReadSlotConfig(flag, env string, readFile func(string) ([]byte, error)) (raw []byte, src SlotConfigSource, ok bool, err error) {
	val := flag
	src.From = "--slot-config"
	if strings.TrimSpace(val) == "" {
		val, src.From = env, SlotConfigEnv
	}
	val = strings.TrimSpace(val)
	if val == "" {
		return nil, SlotConfigSource{}, false, nil
	}
	if strings.HasPrefix(val, "{") {
		return []byte(val), src, true, nil
	}
	src.Path = val
	b, err := readFile(val)
	if err != nil {
		return nil, src, true, contract.Errorf(contract.CodeSlotConfigInvalid, "%s: cannot read the launch configuration file %s: %v", src.From, val, err).
			WithDetails("path", val).WithNext("pass inline JSON starting with { or the path of a readable JSON file")
	}
	return b, src, true, nil
}

// LoadSlotConfig reads, parses and validates a launch configuration, and
// checks that its executionOwnerPid names a running process. Every error is
// a typed contract error (MANAGED_SLOT_CONFIG_INVALID, CONTRACT_UNSUPPORTED,
// MANAGED_SLOT_GROUP_UNSUPPORTED) raised before any daemon or device work.
func LoadSlotConfig(flag, env string) (contract.SlotLaunchConfig, bool, error) {
	raw, src, ok, err := ReadSlotConfig(flag, env, os.ReadFile)
	if !ok || err != nil {
		return contract.SlotLaunchConfig{}, ok, err
	}
	cfg, err := contract.ParseSlotLaunchConfig(raw)
	if err != nil {
		ce := contract.AsError(err)
		if ce == nil {
			ce = contract.Errorf(contract.CodeSlotConfigInvalid, "%v", err)
		}
		ce = ce.WithDetails("source", src.From)
		if src.Path != "" {
			ce = ce.WithDetails("path", src.Path)
		}
		return contract.SlotLaunchConfig{}, true, ce
	}
	if err := checkOwnerPid(cfg.ExecutionOwnerPid, processRunning); err != nil {
		return contract.SlotLaunchConfig{}, true, err
	}
	return cfg, true, nil
}

// checkOwnerPid refuses an executionOwnerPid that names no running process:
// an execution whose owner is already gone would end the moment it began.
func checkOwnerPid(pid int, running func(int) bool) error {
	if pid == 0 {
		return nil
	}
	if pid < 0 || !running(pid) {
		return contract.Errorf(contract.CodeSlotConfigInvalid, "executionOwnerPid %d names no running process", pid).
			WithDetails("field", "executionOwnerPid", "pid", pid).
			WithNext("set executionOwnerPid to the live pid of the process that supervises this execution, or leave it out to watch the launching parent")
	}
	return nil
}

// processRunning says whether pid names a process, ours to signal or not.
func processRunning(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
