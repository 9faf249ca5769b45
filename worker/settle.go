package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/rheo-go/rheo"
)

// lastAttempt reports whether h is its event's last attempt: a retry
// would dead-letter it.
func (c *core) lastAttempt(h *held) bool {
	return c.maxAttempts > 0 && h.lease.Attempt >= c.maxAttempts
}

// isStale reports whether err says the lease is no longer held.
func isStale(err error) bool {
	return errors.Is(err, rheo.ErrStaleLease) || errors.Is(err, rheo.ErrReceiptMismatch)
}

// isUncertain reports whether err leaves the outcome of a call unknown or
// the database unreachable.
func isUncertain(err error) bool {
	return errors.Is(err, rheo.ErrBackendUnavailable) || errors.Is(err, rheo.ErrAmbiguous) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// settle carries out a handler's outcome.
func (c *core) settle(h *held, o outcome) {
	if o.kind == OutcomeAck {
		c.acks.add(ackRequest{h: h})
		return
	}
	ctx, cancel := context.WithTimeout(c.bg, c.s.callTimeout)
	defer cancel()
	if o.kind == OutcomeReject {
		_ = c.reject(ctx, h, o.reason)
		return
	}
	_, _ = c.retry(ctx, h, o.delay, o.reason)
}

// retry makes h's event claimable again after delay, or dead-letters it at
// the attempt limit. A failure leaves the lease to expire.
func (c *core) retry(ctx context.Context, h *held, delay time.Duration, reason string) (rheo.RetryOutcome, error) {
	out, err := c.drv.Retry(ctx, h.lease.LeaseID, &rheo.RetryOptions{Reason: reason, Delay: delay})
	if err == nil && out != rheo.DeadLettered {
		// The event comes back after delay: its key waits for it.
		h.holdFor = delay
	}
	c.release(h)
	if err != nil {
		c.settleFailed(h, "retry", err, failedSettleAction(err))
		return "", err
	}
	if out == rheo.DeadLettered {
		c.deadLettered(h, reason)
		return out, nil
	}
	if delay == 0 {
		// No wakeup announces a retried event: fetch it without waiting
		// for the poll.
		c.claimable.Store(true)
		notify(c.changed)
	}
	for _, x := range c.s.hooks.retried {
		x.Retried(c.bg, RetryInfo{Lease: h.lease, Delay: delay, Reason: reason})
	}
	return out, nil
}

// reject dead-letters h's event now. A failure leaves the lease to expire.
func (c *core) reject(ctx context.Context, h *held, reason string) error {
	err := c.drv.Reject(ctx, h.lease.LeaseID, reason)
	c.release(h)
	if err != nil {
		c.settleFailed(h, "reject", err, failedSettleAction(err))
		return err
	}
	c.deadLettered(h, reason)
	return nil
}

// failedSettleAction is what a failed retry or reject leaves: a stale
// lease is simply dropped, anything else is left to expire.
func failedSettleAction(err error) SettleAction {
	if isStale(err) {
		return ActionDropped
	}
	return ActionLeftToExpire
}

// ackFailed applies the settle policy to an ack (op "ack") or the begin of
// a transactional handler's transaction (op "begin") that failed with err: a
// stale lease is dropped; an unreachable database or an unknown outcome
// leaves the lease to expire (the ack may have committed, and fencing
// keeps a late duplicate safe); a definite failure retries the event at
// once.
func (c *core) ackFailed(h *held, op string, err error) {
	switch {
	case isStale(err):
		c.release(h)
		c.settleFailed(h, op, err, ActionDropped)
	case isUncertain(err):
		c.release(h)
		c.settleFailed(h, op, err, ActionLeftToExpire)
	default:
		c.settleFailed(h, op, err, ActionRetried)
		ctx, cancel := context.WithTimeout(c.bg, c.s.callTimeout)
		defer cancel()
		_, _ = c.retry(ctx, h, 0, op+" failed: "+err.Error())
	}
}

// ackAlone acks h with its own call, for a Consumer lease settled after
// the batcher stopped.
func (c *core) ackAlone(ctx context.Context, h *held) error {
	if err := c.drv.Ack(ctx, h.lease.LeaseID); err != nil {
		c.ackFailed(h, "ack", err)
		return err
	}
	c.release(h)
	c.acked(h)
	return nil
}

func (c *core) acked(h *held) {
	c.settled()
	for _, x := range c.s.hooks.acked {
		x.Acked(c.bg, AckInfo{Lease: h.lease})
	}
}

// settled tells the fetch loop of a settle that may have made later
// events of an ordered group claimable.
func (c *core) settled() {
	if c.ordered() {
		c.unblocked.Store(true)
		notify(c.changed)
	}
}

func (c *core) deadLettered(h *held, reason string) {
	c.settled()
	c.log.LogAttrs(c.bg, slog.LevelWarn, "event dead-lettered", append(leaseAttrs(h.lease), slog.String(LogKeyError, reason))...)
	for _, x := range c.s.hooks.deadLettered {
		x.DeadLettered(c.bg, DeadLetterInfo{Lease: h.lease, Reason: reason})
	}
}

func (c *core) settleFailed(h *held, op string, err error, action SettleAction) {
	c.log.LogAttrs(c.bg, slog.LevelWarn, "settle failed", append(leaseAttrs(h.lease),
		slog.String(LogKeyOp, op), slog.Any(LogKeyError, err), slog.String(LogKeyAction, string(action)))...)
	for _, x := range c.s.hooks.settleFailed {
		x.SettleFailed(c.bg, SettleErrorInfo{Lease: h.lease, Op: op, Err: err, Action: action})
	}
}

// settle carries out a handler's outcome. Retries and rejects are calls
// of their own, made beside the slot so that it takes its next lease at
// once; acks join the ack batch.
func (w *Worker) settle(h *held, o outcome) {
	if o.kind == OutcomeAck {
		w.c.settle(h, o)
		return
	}
	w.handlers.Add(1)
	go func() {
		defer w.handlers.Done()
		w.c.settle(h, o)
	}()
}

// backoff chooses the delay of a retry that the handler left to the retry
// policy. After a hard stop the event is retried at once instead: the
// failure is likely the cancellation itself, and another consumer should
// take the event without waiting.
func (w *Worker) backoff(h *held, o outcome) outcome {
	if !o.backoff {
		return o
	}
	if errors.Is(context.Cause(h.ctx), ErrStopped) {
		o.delay = 0
		return o
	}
	o.delay = clampDelay(w.c.s.RetryPolicy(h.lease, o.err))
	return o
}
