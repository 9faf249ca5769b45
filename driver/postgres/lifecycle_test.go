package postgres_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/postgres"
)

// TestReadCommittedOnRepeatableReadConnections runs the functions that
// refuse any level but READ COMMITTED through a pool of one connection
// whose default is REPEATABLE READ, in pgx's default exec mode and in the
// simple protocol: the driver runs each in a READ COMMITTED transaction
// of its own, so each succeeds, while the same SQL on such a connection
// is invalid_argument; one that fails leaves the connection out of its
// transaction for the next.
func TestReadCommittedOnRepeatableReadConnections(t *testing.T) {
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			url := newDatabase(t)
			ctx := t.Context()
			cfg, err := pgxpool.ParseConfig(url)
			require.NoError(t, err)
			cfg.MaxConns = 1
			cfg.ConnConfig.DefaultQueryExecMode = mode
			cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			require.NoError(t, err)
			t.Cleanup(pool.Close)
			d := postgres.New(pool, nil)
			t.Cleanup(func() { _ = d.Close() })

			require.NoError(t, d.CreateStream(ctx, "s", 1))
			require.NoError(t, d.SetRetention(ctx, "s", time.Hour))
			_, err = pool.Exec(ctx, `SELECT rheo.create_group('s', 'g')`)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Contains(t, pgErr.Detail, "create_group must run at READ COMMITTED, not REPEATABLE READ")

			_, err = d.Prune(ctx, "missing", nil)
			require.ErrorIs(t, err, rheo.ErrStreamNotFound)
			require.NoError(t, d.CreateGroup(ctx, "s", "g", nil))
			require.ErrorIs(t, d.CreateGroup(ctx, "s", "g", nil), rheo.ErrAlreadyExists)
			require.NoError(t, d.SetOrdering(ctx, "s", "g", rheo.OrderingKey))
			from := int64(0)
			_, err = d.Replay(ctx, "s", "g", &rheo.ReplayOptions{FromSequence: &from})
			require.NoError(t, err)
			require.NoError(t, d.ResetGroup(ctx, "s", "g", &rheo.ResetOptions{Confirm: true}))
			_, err = d.Prune(ctx, "s", &rheo.PruneOptions{Force: true})
			require.NoError(t, err)
			require.NoError(t, d.DropGroup(ctx, "s", "g", &rheo.DropOptions{Confirm: true}))
			_, err = d.DropStream(ctx, "s", &rheo.DropOptions{Confirm: true})
			require.NoError(t, err)
			var status string
			require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('transaction_isolation')`).Scan(&status))
			require.Equal(t, "repeatable read", status, "the connection's own default is untouched")
		})
	}
}
