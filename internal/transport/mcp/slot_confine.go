package mcp

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"github.com/simlock/simlock/contract"
)

// Confinement of a managed connection: its tools act on the slot's own
// lease and device only. What it refuses here never reaches the daemon;
// the daemon enforces the same from its side (DEVICE_ASSIGNED_TO_MANAGED_SLOT
// for plain clients).

// Refusal reasons (details.reason of DEVICE_OUTSIDE_MANAGED_SLOTS).
const (
	outsideDevice  = "device"
	outsideSession = "session"
	outsideTool    = "tool"
	outsideScope   = "scope"
	outsideHost    = "host"
)

// slotReadTools stay open on a managed connection: they change nothing.
var slotReadTools = []string{ToolListDevices, ToolLeaseStatus}

// slotLifecycleTools acquire or give back devices. A slot connection gets
// its device from the acquisition and ends it by ending the execution, so
// these are refused even on its own device: a release or a stop would
// strand the execution it serves.
var slotLifecycleTools = []string{ToolLeaseSimulator, ToolReleaseSimulator}

// Lifecycle verbs inside device_exec, refused for the same reason.
var (
	simctlLifecycle = []string{"boot", "shutdown", "erase", "delete", "create", "clone", "rename", "pair", "unpair"}
	udidPattern     = regexp.MustCompile(`(?i)^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// slotBounds is what a managed connection may touch.
type slotBounds struct {
	leaseID  string
	platform string
	// ids are the slot device's names: stable id, transport id, device id.
	ids   []string
	scope contract.SlotScope
}

func (x *slotExec) bounds() (slotBounds, bool) {
	slot, ok := x.ownSlot()
	if !ok {
		return slotBounds{}, false
	}
	x.mu.Lock()
	scope := x.result.Scope
	x.mu.Unlock()
	b := slotBounds{leaseID: slot.LeaseID, platform: slot.Platform, scope: scope}
	if d := slot.Device; d != nil {
		for _, id := range []string{d.StableID, d.TransportID, d.DeviceID} {
			if id != "" {
				b.ids = append(b.ids, id)
			}
		}
	}
	return b, true
}

// requester is the execution lease's requester, which device.exec names.
func (x *slotExec) requester() string {
	slot, _ := x.ownSlot()
	return slot.RequesterID
}

func outside(reason, format string, args ...any) *contract.Error {
	return contract.Errorf(contract.CodeDeviceOutsideSlots, format, args...).WithDetails("reason", reason).
		WithNext("act only on this execution's own slot device; to stop or change it, end the execution and relaunch")
}

// admit decides whether a tool call stays inside the slot. args is the
// call's raw arguments; ones that do not decode are left to the tool's own
// validation.
func (b slotBounds) admit(tool string, args json.RawMessage) error {
	if slices.Contains(slotLifecycleTools, tool) {
		return outside(outsideTool, "%s acquires or releases devices, which a managed slot's execution never does: its device comes with the slot", tool).
			WithDetails("tool", tool)
	}
	if slices.Contains(slotReadTools, tool) {
		return nil
	}
	var in map[string]json.RawMessage
	if len(args) > 0 && json.Unmarshal(args, &in) != nil {
		return nil
	}
	str := func(k string) string {
		var s string
		_ = json.Unmarshal(in[k], &s)
		return s
	}
	if id := str("leaseId"); id != "" && id != b.leaseID {
		return outside(outsideSession, "lease %s is not this execution's; a managed connection acts only on its slot's lease %s", id, b.leaseID).
			WithDetails("leaseId", id)
	}
	for _, k := range []string{"deviceId", "udid", "serial"} {
		if id := str(k); id != "" && !slices.Contains(b.ids, id) {
			return outside(outsideDevice, "device %s is not this execution's slot device", id).WithDetails("deviceId", id)
		}
	}
	if p := str("platform"); p != "" && p != b.platform {
		return outside(outsideDevice, "this execution's slot holds no %s device", p).WithDetails("platform", p)
	}
	if h := str("managedHostScope"); h != "" && h != b.scope.ManagedHostScope {
		return outside(outsideHost, "managed host scope %q is not this execution's (%q)", h, b.scope.ManagedHostScope).
			WithDetails("managedHostScope", h)
	}
	for _, k := range []string{"runnerNamespace", "runnerIncarnation"} {
		own := b.scope.RunnerNamespace
		if k == "runnerIncarnation" {
			own = b.scope.RunnerIncarnation
		}
		if v := str(k); v != "" && v != own {
			return outside(outsideScope, "%s %q is not this execution's scope (%q)", k, v, own).WithDetails(k, v)
		}
	}
	if tool == ToolDeviceExec {
		var argv []string
		_ = json.Unmarshal(in["args"], &argv)
		return b.admitExec(str("tool"), argv)
	}
	return nil
}

// admitExec confines one device_exec command: the platform's own tool,
// no other device named, no lifecycle verb.
func (b slotBounds) admitExec(tool string, argv []string) error {
	want := map[string]string{"ios": "simctl", "android": "adb"}[b.platform]
	if tool != "" && tool != want {
		other := map[string]string{"simctl": "ios", "adb": "android"}[tool]
		return outside(outsideDevice, "%s drives %s devices; this execution's slot device is %s", tool, other, b.platform).
			WithDetails("tool", tool, "platform", other)
	}
	lifecycle := func(verb string) error {
		return outside(outsideTool, "%s %s is a lifecycle command; a managed execution cannot stop, boot or delete its slot device", tool, verb).
			WithDetails("tool", ToolDeviceExec, "command", verb)
	}
	switch tool {
	case "simctl":
		if len(argv) > 0 && slices.Contains(simctlLifecycle, argv[0]) {
			return lifecycle(argv[0])
		}
		for _, a := range argv {
			if udidPattern.MatchString(a) && !slices.ContainsFunc(b.ids, func(id string) bool { return strings.EqualFold(id, a) }) {
				return outside(outsideDevice, "device %s is not this execution's slot device", a).WithDetails("deviceId", a)
			}
		}
	case "adb":
		for i, a := range argv {
			if (a == "-s" || a == "-t") && i+1 < len(argv) && !slices.Contains(b.ids, argv[i+1]) {
				return outside(outsideDevice, "device %s is not this execution's slot device", argv[i+1]).WithDetails("deviceId", argv[i+1])
			}
		}
		rest := adbCommand(argv)
		switch {
		case len(rest) >= 2 && rest[0] == "emu" && rest[1] == "kill":
			return lifecycle("emu kill")
		case len(rest) >= 1 && rest[0] == "reboot":
			return lifecycle("reboot")
		case len(rest) >= 2 && rest[0] == "shell" && slices.Contains([]string{"reboot", "poweroff"}, rest[1]):
			return lifecycle("shell " + rest[1])
		}
	}
	return nil
}

// adbCommand drops adb's leading global options (-s SERIAL and friends).
func adbCommand(argv []string) []string {
	for i := 0; i < len(argv); i++ {
		switch argv[i] {
		case "-s", "-t", "-H", "-P", "-L":
			i++
		case "-d", "-e", "-a":
		default:
			return argv[i:]
		}
	}
	return nil
}
