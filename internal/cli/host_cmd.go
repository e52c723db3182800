package cli

import (
	"errors"

	"github.com/simlock/simlock/internal/daemon"
	"github.com/simlock/simlock/internal/hostreg"
)

// hostRegistryError gives a host registry error read by the CLI itself
// (device status, device release) the daemon's code where it has one:
// a damaged registry is HOST_REGISTRY_DAMAGED, naming the file and the
// repair, exactly as from a daemon.
func hostRegistryError(err error) error {
	var dmg *hostreg.DamagedError
	if errors.As(err, &dmg) {
		return daemon.ContractError(err)
	}
	return err
}
