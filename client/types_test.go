package client

import (
	"testing"

	"github.com/simlock/simlock/contract"
)

func TestEveryOperationIsReexported(t *testing.T) {
	have := map[string]bool{}
	for _, op := range allOperations {
		have[op.Name] = true
	}
	for _, op := range contract.Registry() {
		if !have[op.Name] {
			t.Errorf("client does not re-export %s; add it to client/types.go", op.Name)
		}
	}
}
