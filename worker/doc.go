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
package worker
