// Package worker consumes a Rheo consumer group: it fetches leases, runs
// handlers with bounded concurrency, renews leases while handlers run, and
// settles each event by the handler's outcome (ack, retry or reject).
//
// # A worker
//
// A Worker runs a Handler for every event of a group. Typed decodes the
// payload into a Go type first:
//
//	type OrderPlaced struct {
//		Customer string `json:"customer"`
//		Total    int    `json:"total"`
//	}
//
//	w, err := worker.New(drv, &worker.Config{
//		Stream: "orders",
//		Group:  "billing",
//		Handler: worker.Typed(func(ctx context.Context, lease rheo.Lease, order OrderPlaced) error {
//			return bill(ctx, order)
//		}),
//	})
//	if err != nil { … }
//
// The handler's return is the outcome: nil acks the event; Retry(delay,
// err) retries it after delay; Reject(err) dead-letters it; any other
// error (or a panic) retries it after Config.RetryPolicy's back-off. At
// the group's max_attempts a retry dead-letters instead. A payload that
// does not decode into the Typed handler's type is dead-lettered at once.
// Producers append such values with driver.AppendJSON; a type with an
// EventType method (rheo.EventTyper) names the event's type.
//
// # Starting and stopping
//
// Start runs the worker in the background until its context is
// cancelled, which is a soft stop: no more fetches, the handlers in
// flight finish and are settled, the leases fetched ahead are given back;
// after Config.SoftStopTimeout the stop turns hard and cancels the
// handlers' contexts. So a service stops on SIGTERM without losing work:
//
//	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//	defer cancel()
//	if err := w.Start(ctx); err != nil { … }
//	<-w.Done()
//
// Stop and StopAndCancel stop it from code, softly or at once.
//
// # Transactions
//
// A TxHandler (TypedTx for a typed one) runs inside a transaction in
// which the ack commits, with the handler's own writes through tx: on
// PostgreSQL postgres.PgxTx(tx) is the pgx.Tx, on SQLite tx.Native() is
// the *sql.Tx.
//
// # A consumer
//
// A Consumer hands leases to the caller instead, as an iterator with
// bounded demand; the caller settles each one with Lease.Ack, Lease.Retry
// or Lease.Reject:
//
//	for lease, err := range c.Leases(ctx) {
//		if err != nil { continue } // a fetch error; the iterator backs off
//		… lease.Ack(ctx) …
//	}
//
// # Retry, three spellings
//
// One operation, rheo.retry (reference §5.4), has three spellings, one
// per layer, each taking what its caller has at hand:
//
//   - in a Handler, return Retry(delay, err) (or any error, for the
//     delay of Config.RetryPolicy): the worker settles the lease;
//   - with a Consumer, call Lease.Retry(ctx, delay, reason) on the lease
//     it handed out: the caller settles it, and there is no policy;
//   - on a driver, call driver.Ops.Retry(ctx, leaseID, opts) with a lease
//     id: the operation itself, which the two above call.
//
// All three dead-letter the event instead when the group's max_attempts
// are used up (rheo.DeadLettered), 20 by default for new groups (about an
// hour of DefaultRetryPolicy's back-off).
//
// # Testing
//
// Package rheotest runs a handler once against an in-memory database
// (rheotest.Work) and gives the driver and the worker one Clock that the
// test moves (Config.Clock), so that leases, renewals and retries follow
// the test instead of real time.
//
// Both Worker and Consumer are written against driver.Driver only and
// behave the same on PostgreSQL and SQLite. Delivery is at-least-once: a
// handler may see an event again after a crash, a lost connection or a
// lost lease. docs/worker.md is the guide.
package worker
