package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/postgres"
)

// The transactional outbox with pgx: the order and its event commit
// together, or neither does. The pool is the application's own; New
// leaves it open at Close. A Rheo call that fails in the transaction
// leaves the transaction usable (it rolls back to a savepoint of its
// own), and its error is classified: errors.Is(err,
// rheo.ErrStreamNotFound) for a stream that does not exist.
func ExampleDriver_WithTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	drv := postgres.New(pool, nil)
	defer drv.Close()

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id, total_cents) VALUES ($1, $2)`, "order-42", 1999); err != nil {
			return err
		}
		// The order id as the event id: appending it again is a repeat,
		// not a second event.
		_, err := drv.WithTx(tx).Append(ctx, "orders",
			json.RawMessage(`{"type": "order.placed", "order_id": "order-42", "total_cents": 1999}`),
			&rheo.AppendOptions{ID: "order-42", Key: "customer-7"})
		if errors.Is(err, rheo.ErrStreamNotFound) {
			return errors.New("create the orders stream first: rheo create-stream orders")
		}
		return err
	})
	if err != nil {
		panic(err)
	}
}
