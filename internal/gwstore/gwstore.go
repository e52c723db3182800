// Package gwstore picks a gateway's store (ADR 0101): the home's own
// SQLite file, or PostgreSQL when gateway.store.postgres names a database.
package gwstore

import (
	"context"
	"fmt"

	"github.com/simlock/simlock/internal/gateway"
	"github.com/simlock/simlock/internal/gwstore/pgstore"
)

// Open returns the store a gateway should use and the function that closes
// what Open opened (nothing, for the home store, which its daemon owns).
// An empty dsn is the home store.
func Open(ctx context.Context, dsn string, poolSize int, home gateway.Store) (gateway.Store, func(), error) {
	if dsn == "" {
		return home, func() {}, nil
	}
	st, err := pgstore.Open(ctx, dsn, poolSize)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway.store.postgres: %w", err)
	}
	return st, st.Close, nil
}
