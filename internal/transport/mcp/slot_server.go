package mcp

import (
	"context"
	"encoding/json"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/simlock/simlock/contract"
)

// What a managed connection publishes.
const (
	// SlotCapability is the initialize capability (under experimental)
	// that carries the acquisition result, a snapshot at connect.
	SlotCapability = "simlock/managedSlots"
	// SlotResourceURI is the resource that carries the result as it is
	// now: with executionEnded on a slot once its lease ended for good.
	SlotResourceURI = "simlock://managed-slots"
)

const slotInstructions = `
This server runs one execution of a managed slot: its device was acquired before initialize (see the experimental capability
simlock/managedSlots and the resource simlock://managed-slots). Do not lease or release devices: the tools act only on the slot's own
lease, and ending this server ends the execution (the slot keeps its device for the next one).`

// decorate adds the acquisition result to the initialize answer.
func (x *slotExec) decorate(opts *mcpsdk.ServerOptions) {
	var payload map[string]any
	b, _ := json.Marshal(x.snapshot())
	_ = json.Unmarshal(b, &payload)
	if opts.Capabilities == nil {
		opts.Capabilities = &mcpsdk.ServerCapabilities{}
	}
	opts.Capabilities.Experimental = map[string]any{SlotCapability: payload}
	opts.Capabilities.Resources = &mcpsdk.ResourceCapabilities{}
	opts.Instructions += slotInstructions
}

// tools is what a managed connection lists: nothing after a failed
// acquisition (every call is refused anyway), else the usual set.
func (x *slotExec) tools(all []tool) []tool {
	if !x.ready() {
		return nil
	}
	return all
}

// install adds the managed-slots resource and the gate every tool call
// passes first: the execution's state, then confinement to its slot.
func (x *slotExec) install(srv *mcpsdk.Server) {
	srv.AddResource(&mcpsdk.Resource{URI: SlotResourceURI, Name: "managed-slots", Title: "Managed slot acquisition",
		Description: "This execution's managed-slot acquisition result; executionEnded appears on the slot once its lease ended for good.",
		MIMEType:    "application/json"}, x.readResource)
	srv.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			call, ok := req.(*mcpsdk.CallToolRequest)
			if !ok || call.Params == nil {
				return next(ctx, method, req)
			}
			res, err := x.gated(ctx, call, func() (mcpsdk.Result, error) { return next(ctx, method, req) })
			// The first answer after a re-bind says the daemon came back.
			if r, ok := res.(*mcpsdk.CallToolResult); ok && err == nil {
				if n := x.takeNotice(); n != "" {
					if r.Meta == nil {
						r.Meta = mcpsdk.Meta{}
					}
					r.Meta[SlotCapability] = map[string]any{"notice": n}
				}
			}
			return res, err
		}
	})
}

// gated runs a tool call past the execution's state and its confinement.
func (x *slotExec) gated(_ context.Context, call *mcpsdk.CallToolRequest, next func() (mcpsdk.Result, error)) (mcpsdk.Result, error) {
	if err := x.gate(); err != nil {
		return errorResult(err), nil
	}
	if b, ok := x.bounds(); ok {
		if err := b.admit(call.Params.Name, call.Params.Arguments); err != nil {
			return errorResult(err), nil
		}
	}
	return next()
}

func (x *slotExec) readResource(_ context.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
	b, err := json.Marshal(x.snapshot())
	if err != nil {
		return nil, contract.Errorf(contract.CodeInternal, "encode the managed-slots result: %v", err)
	}
	return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{
		{URI: SlotResourceURI, MIMEType: "application/json", Text: string(b)},
	}}, nil
}

// ownLease is the lease a tool acts on for a managed connection: the
// slot's, whatever the call named (confinement already refused others).
func (x *slotExec) ownLease(id string) (string, error) {
	slot, ok := x.ownSlot()
	if !ok {
		return "", x.gate()
	}
	if id != "" && id != slot.LeaseID {
		return "", outside(outsideSession, "lease %s is not this execution's; a managed connection acts only on its slot's lease %s", id, slot.LeaseID).
			WithDetails("leaseId", id)
	}
	return slot.LeaseID, nil
}
