package gateway

import (
	"context"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/dispatch"
)

// deviceUpload forwards one chunk to the worker holding the lease and
// answers only once the worker has stored it. A sender sends its next
// chunk only after that answer (the client and the HTTP route both do), so
// the gateway holds one chunk of a file at a time and a slow worker slows
// the sender rather than filling the gateway's memory (ADR 0034). The
// dispatcher's ownsLease check ran here already, against the gateway's own
// lease index; the file and the {upload:NAME} substitution live on the
// worker.
func (g *Gateway) deviceUpload(ctx context.Context, _ *dispatch.Call, in contract.DeviceUploadIn) (contract.DeviceUploadOut, error) {
	var out contract.DeviceUploadOut
	if _, _, err := g.forward(ctx, in.LeaseID, contract.DeviceUpload.Name, func(lid string) any { in.LeaseID = lid; return in }, &out); err != nil {
		return contract.DeviceUploadOut{}, err
	}
	return out, nil
}
