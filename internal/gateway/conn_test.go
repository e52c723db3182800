package gateway

import "github.com/simlock/simlock/client"

// The lead's uplink hands the gateway a *client.Client per worker.
var _ WorkerConn = (*client.Client)(nil)
