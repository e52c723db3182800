package mcp

import (
	"context"
	"slices"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/client"
	"github.com/simlock/simlock/contract"
)

// Resource tool names. The two that write are opt-in: served only when the
// server was started with --enable-tool NAME (Options.EnableTools) or the
// daemon's config enables resources (Options.ResourcesEnabled).
const (
	ToolGetResources       = "get_device_resources"
	ToolSetResources       = "set_device_resources"
	ToolReconcileResources = "reconcile_device_resources"
)

type getResourcesIn struct {
	LeaseID string `json:"leaseId,omitempty"`
}

type setResourcesIn struct {
	LeaseID   string                            `json:"leaseId,omitempty"`
	Resources map[string]contract.ResourceState `json:"resources,omitempty"`
	Restore   *contract.RestoreReceipt          `json:"restore,omitempty"`
	TimeoutMs int64                             `json:"timeoutMs,omitempty"`
}

type reconcileResourcesIn struct {
	LeaseID            string                            `json:"leaseId,omitempty"`
	Resources          map[string]contract.ResourceState `json:"resources"`
	Repair             bool                              `json:"repair,omitempty"`
	ReleaseOwnedExtras bool                              `json:"releaseOwnedExtras,omitempty"`
	TimeoutMs          int64                             `json:"timeoutMs,omitempty"`
}

const resourceErrors = `Errors (JSON {"error":{code,message,retryable,nextAction}}): FORBIDDEN (leaseId is not a lease this session holds),
BAD_REQUEST (no lease held, or an unknown group, a raw service name, a profile name or an empty map), RESOURCES_NOT_ENABLED
(tuning is off for this lease: ask for the lease with resources, or the operator enables resources.enabled),
RESTORE_RECEIPT_MISMATCH (the receipt is from another device or boot), UNKNOWN_LEASE (the lease ended), DEVICE_FAILED.`

func groupNames() string {
	var names []string
	for _, g := range contract.ResourceGroups() {
		names = append(names, g.Name+" ("+strings.Join(g.Platforms, "/")+")")
	}
	return strings.Join(names, ", ")
}

// resourceTools are the resource tools this server offers.
func (s *session) resourceTools() []tool {
	mapProp := map[string]any{"description": "A partial map of resource group to \"enabled\" or \"disabled\"; groups not named are left alone. Groups: " + groupNames() + "."}
	leaseProp := map[string]any{"description": "The lease whose device to act on (default: the one this session holds)."}
	out := []tool{{decl: &mcpsdk.Tool{
		Name:  ToolGetResources,
		Title: "Observe a leased device's resource groups",
		Description: `Read the state of every resource group (background services such as animations, widgets, search indexing, sync)
of the device you lease. Each group is enabled or disabled only when every service in it was observed so; unsupported means the
device cannot provide or control it, unknown that the evidence was missing or mixed (reason says why). Returns the ResourceResult:
resources (per group), services (per-service evidence), verification ("current_boot"). ` + resourceErrors,
		Annotations:  &mcpsdk.ToolAnnotations{Title: "Observe resource groups", ReadOnlyHint: true, OpenWorldHint: new(false)},
		InputSchema:  schemaFor[getResourcesIn](map[string]any{"leaseId": leaseProp}),
		OutputSchema: schemaFor[contract.ResourceResult](nil),
	}, run: s.getResources}}
	if s.toolEnabled(ToolSetResources) {
		out = append(out, tool{decl: &mcpsdk.Tool{
			Name:  ToolSetResources,
			Title: "Enable or disable resource groups",
			Description: `Enable or disable resource groups on the device you lease, e.g. {"resources": {"animations": "disabled"}}, to make
test runs faster and steadier. The answer is an independent re-read, never the request: success is true only when every named
group was observed as asked; check resources per group. On Android the answer carries restore: pass it back as {"restore": ...}
(instead of resources) to undo exactly what was changed, on the same device and boot. ` + resourceErrors,
			Annotations: &mcpsdk.ToolAnnotations{Title: "Tune resource groups", DestructiveHint: new(false), IdempotentHint: true, OpenWorldHint: new(false)},
			InputSchema: schemaFor[setResourcesIn](map[string]any{"leaseId": leaseProp, "resources": mapProp,
				"restore":   map[string]any{"description": "A restore receipt from an earlier Android answer; exactly one of resources and restore."},
				"timeoutMs": map[string]any{"description": "Deadline for the whole call in milliseconds (default 300000)."}}),
			OutputSchema: schemaFor[contract.ResourceResult](nil),
		}, run: s.setResources})
	}
	if s.toolEnabled(ToolReconcileResources) {
		out = append(out, tool{decl: &mcpsdk.Tool{
			Name:  ToolReconcileResources,
			Title: "Compare resource groups with a requested map",
			Description: `Compare a requested resource map with what the device you lease is observed to be, as typed drift: missingRequested
(observed the other way), ownedExtra (an override simlock wrote outside the map), unsupported, commandFailure (no evidence).
repair re-applies the drifted groups; releaseOwnedExtras undoes simlock's overrides outside the map; finalDrift is what is left,
and success means none. ` + resourceErrors,
			Annotations: &mcpsdk.ToolAnnotations{Title: "Reconcile resource groups", DestructiveHint: new(false), IdempotentHint: true, OpenWorldHint: new(false)},
			InputSchema: schemaFor[reconcileResourcesIn](map[string]any{"leaseId": leaseProp, "resources": mapProp,
				"repair":             map[string]any{"description": "Re-apply the drifted requested groups, then observe again."},
				"releaseOwnedExtras": map[string]any{"description": "Also undo overrides simlock wrote outside the map."},
				"timeoutMs":          map[string]any{"description": "Deadline for the whole call in milliseconds (default 300000)."}}),
			OutputSchema: schemaFor[contract.ResourceResult](nil),
		}, run: s.reconcileResources})
	}
	return out
}

// toolEnabled says whether an opt-in tool is served.
func (s *session) toolEnabled(name string) bool {
	return s.o.ResourcesEnabled || slices.Contains(s.o.EnableTools, name)
}

// sessionLease resolves a tool's leaseId to a lease this session holds:
// the resource tools act on the session's own device only.
// sessionLease resolves the lease a tool acts on: the one this session
// holds (when it holds exactly one and none is named), never another, even
// one the daemon would let this principal drive. The session is the agent's
// boundary; its principal may be shared.
func (s *session) sessionLease(id string) (string, error) {
	if s.slot != nil {
		return s.slot.ownLease(id)
	}
	if s.acquired != nil {
		return s.acquired.ownLease(id)
	}
	ids := s.heldIDs()
	if id != "" {
		if !slices.Contains(ids, id) {
			return "", contract.Errorf(contract.CodeForbidden, "lease %s is not this session's; these tools act only on the leases this session holds", id).
				WithDetails("leaseId", id).WithNext("call lease_status for the leases this session holds, or lease_simulator for one")
		}
		return id, nil
	}
	switch len(ids) {
	case 1:
		return ids[0], nil
	case 0:
		return "", contract.Errorf(contract.CodeBadRequest, "this session holds no lease").
			WithNext("call lease_simulator first; these tools act on the device it leases")
	}
	return "", contract.Errorf(contract.CodeBadRequest, "this session holds %d leases (%s); say which with leaseId",
		len(ids), strings.Join(ids, ", ")).WithDetails("leaseIds", ids).WithNext("pass leaseId")
}

// onSessionLease is every resource tool's preamble: decode the arguments
// into in (whose leaseId field is *id once decoded), resolve the session's
// own lease, and connect.
func (s *session) onSessionLease(ctx context.Context, req *mcpsdk.CallToolRequest, in any, id *string) (*client.Client, string, error) {
	if err := decodeArgs(req, in); err != nil {
		return nil, "", err
	}
	lid, err := s.sessionLease(*id)
	if err != nil {
		return nil, "", err
	}
	c, err := s.conn(ctx, false)
	return c, lid, err
}

func (s *session) getResources(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error) {
	var in getResourcesIn
	c, id, err := s.onSessionLease(ctx, req, &in, &in.LeaseID)
	if err != nil {
		return nil, err
	}
	return c.ResourcesGet(ctx, id)
}

func (s *session) setResources(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error) {
	var in setResourcesIn
	c, id, err := s.onSessionLease(ctx, req, &in, &in.LeaseID)
	if err != nil {
		return nil, err
	}
	res, err := c.ResourcesSet(ctx, contract.ResourcesSetIn{LeaseID: id, Resources: in.Resources, Restore: in.Restore, TimeoutMs: in.TimeoutMs})
	if err != nil {
		return nil, err
	}
	return res, unprovenSet(res)
}

// unprovenSet makes a write whose requested state was not observed a tool
// error, as the CLI makes it exit 1: an agent that tuned a device must not
// carry on as if it had worked. The error keeps the whole answer under
// details.result, so the evidence (what was observed, what was written,
// the services) reaches the agent all the same.
func unprovenSet(res contract.ResourceResult) error {
	if res.Success {
		return nil
	}
	var unproven []string
	for group, want := range res.Requested {
		if res.Resources[group].State != want {
			unproven = append(unproven, group)
		}
	}
	slices.Sort(unproven)
	return contract.Errorf(contract.CodeResourceUnproven, "the device was not observed in the requested state for %s (verification %s)",
		strings.Join(unproven, ", "), res.Verification).
		WithDetails("result", res, "unproven", unproven).
		WithNext("read details.result for what was observed and written; retry set_device_resources, or drop the groups the device cannot prove")
}

func (s *session) reconcileResources(ctx context.Context, req *mcpsdk.CallToolRequest) (any, error) {
	var in reconcileResourcesIn
	c, id, err := s.onSessionLease(ctx, req, &in, &in.LeaseID)
	if err != nil {
		return nil, err
	}
	return client.Do(ctx, c, contract.ResourcesReconcile, contract.ResourcesReconcileIn{LeaseID: id, Resources: in.Resources,
		Repair: in.Repair, ReleaseOwnedExtras: in.ReleaseOwnedExtras, TimeoutMs: in.TimeoutMs})
}
