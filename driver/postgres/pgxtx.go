package postgres

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo/driver"
)

// PgxTx returns the pgx transaction under tx, for a TxHandler's own
// writes on PostgreSQL:
//
//	cfg.TxHandler = worker.TypedTx(func(ctx context.Context, tx driver.Tx, lease rheo.Lease, order OrderPlaced) error {
//		_, err := postgres.PgxTx(tx).Exec(ctx, `INSERT INTO invoices (event_id, total) VALUES ($1, $2)`, lease.Event.ID, order.Total)
//		return err
//	})
//
// tx is a transaction of this package's driver (given by the worker, by
// InTx or by WithTx), or a wrapper whose Native returns its pgx.Tx, as
// rheootel's does. Any other tx is a programming error: PgxTx panics.
func PgxTx(tx driver.Tx) pgx.Tx {
	if ptx, ok := tx.Native().(pgx.Tx); ok {
		return ptx
	}
	panic(fmt.Sprintf("postgres.PgxTx: %T is not a PostgreSQL transaction (its Native is %T)", tx, tx.Native()))
}
