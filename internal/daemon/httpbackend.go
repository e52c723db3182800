package daemon

import "github.com/simlock/simlock/internal/transport/httpapi"

// HTTPBackend is the backend the daemon's own HTTP listener serves: the
// same dispatcher in-process, bearer tokens from the store, and the
// lossless event observer for lease notices. It lets a caller (the test
// stack in internal/daemon/daemontest) put its own httpapi.Server in front
// of this daemon with exactly the production wiring.
func (d *Daemon) HTTPBackend() httpapi.Backend { return httpAdapter{socketAdapter{d}} }
