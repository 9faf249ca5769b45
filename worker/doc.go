// Package worker consumes a Rheo consumer group: it fetches leases, runs
// handlers with bounded concurrency, renews leases while handlers run, and
// settles each event by the handler's outcome (ack, retry or reject).
//
// A Worker runs a Handler (or a TxHandler, whose ack commits with the
// handler's own writes) for every event of a group:
//
//	w, err := worker.New(drv, &worker.Config{
//		Stream:  "orders",
//		Group:   "billing",
//		Handler: func(ctx context.Context, lease rheo.Lease) error {
//			return bill(ctx, lease.Event)
//		},
//	})
//	if err != nil { … }
//	if err := w.Start(ctx); err != nil { … }
//	defer w.Stop(ctx)
//
// A Consumer hands leases to the caller instead, as an iterator with
// bounded demand; the caller settles each one with Lease.Ack, Lease.Retry
// or Lease.Reject.
//
// Both are written against driver.Driver only and behave the same on
// PostgreSQL and SQLite. Delivery is at-least-once: a handler may see an
// event again after a crash, a lost connection or a lost lease.
package worker
