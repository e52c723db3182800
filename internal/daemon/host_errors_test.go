package daemon

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/simlock/simlock/contract"
	"github.com/simlock/simlock/internal/hostreg"
)

// A damaged host registry, however deeply wrapped, is HOST_REGISTRY_DAMAGED:
// not retryable, naming the file and the repair command.
func TestDamagedRegistryMapsToItsOwnCode(t *testing.T) {
	dmg := &hostreg.DamagedError{Path: "/h/host.db", Err: errors.New("file is not a database (26)")}
	ce := toContractError(fmt.Errorf("claim ios:udid:X: %w", dmg))
	if ce.Code != contract.CodeHostRegistryDamaged || ce.Retryable || ce.Details["path"] != "/h/host.db" ||
		!strings.Contains(ce.Message, "/h/host.db") || !strings.Contains(ce.NextAction, hostreg.RepairCommand) {
		t.Fatalf("%+v", ce)
	}
	if info := contract.InfoFor(contract.CodeHostRegistryDamaged); info.Retryable {
		t.Fatal("the table marks HOST_REGISTRY_DAMAGED retryable")
	}
}
