package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/gateway/gatewaystoretest"
)

// The home store keeps a gateway's state by the same contract as
// PostgreSQL does.
func TestGatewayStoreContract(t *testing.T) {
	gatewaystoretest.Run(t, func(t *testing.T) gateway.Store {
		db, err := Open(context.Background(), filepath.Join(t.TempDir(), "store.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}
