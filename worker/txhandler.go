package worker

import (
	"context"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// handleTx runs the TxHandler for h inside a transaction that also acks,
// so the handler's writes and the ack commit or roll back together. The
// worker's own calls in the transaction (its begin, the ack and the
// commit) are each bounded by the call timeout, the handler is not: a
// transaction that cannot begin or commit in time gives the lease up
// like a failed ack, and its slot is freed.
func (w *Worker) handleTx(h *held) {
	start := time.Now()
	var (
		ran        bool
		handlerErr error
		lost       bool
	)
	ctx, bound := newCallBound(h.ctx, w.c.s.callTimeout)
	defer bound.end()
	bound.start("begin")
	err := w.transactor.InTx(ctx, func(ctx context.Context, tx driver.Tx) error {
		if !bound.stop() {
			// The begin outlasted its bound: do not start the handler.
			return context.Cause(ctx)
		}
		ran = true
		ctx = w.c.s.hooks.startHandle(ctx, h.lease)
		handlerErr = callTxHandler(w.c.s.TxHandler, ctx, tx, h.lease)
		lost = w.c.deactivate(h)
		switch {
		case handlerErr != nil:
			return handlerErr
		case lost:
			// Roll back: the ack would be fenced off anyway.
			return rheo.Errorf(rheo.ErrStaleLease, "lease %s was lost while the handler ran", h.lease.LeaseID)
		}
		ackCtx, cancel := context.WithTimeout(ctx, w.c.s.callTimeout)
		defer cancel()
		if err := tx.Ack(ackCtx, h.lease.LeaseID); err != nil {
			return err
		}
		bound.start("commit")
		return nil
	})
	err = bound.explain(err)
	took := time.Since(start)
	w.freeSlot(took)
	if !ran {
		// The transaction did not begin, so the handler did not run.
		w.c.deactivate(h)
		if cause := context.Cause(h.ctx); cause != nil {
			// Stopped or lost before it began: give the event back.
			w.settle(h, outcome{kind: OutcomeRetry, reason: cause.Error()})
			return
		}
		w.c.ackFailed(h, "begin", err)
		return
	}
	o := outcomeOf(handlerErr)
	w.handled(h, o, handlerErr, lost, took)
	switch {
	case lost:
		w.c.release(h)
	case handlerErr != nil:
		w.settle(h, w.backoff(h, o))
	case err != nil:
		w.c.ackFailed(h, "ack", err)
	default:
		w.c.release(h)
		w.c.acked(h)
	}
}
