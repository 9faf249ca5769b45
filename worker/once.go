package worker

import (
	"context"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/handleonce"
)

func init() { handleonce.Run = handleOnce }

// handleOnce is handleonce.Run: one handler run and its settle, with the
// worker's reading of the outcome and its default retry policy, for
// rheotest.Work.
func handleOnce(ctx context.Context, ops driver.Ops, l rheo.Lease, h func(context.Context, rheo.Lease) error) (handleonce.Outcome, error, error) {
	handlerErr := callHandler(h, ctx, l)
	o := outcomeOf(handlerErr)
	if o.backoff {
		o.delay = clampDelay(DefaultRetryPolicy(l, o.err))
	}
	res := handleonce.Outcome{Kind: string(o.kind), Delay: o.delay, Reason: o.reason}
	var err error
	switch o.kind {
	case OutcomeAck:
		err = ops.Ack(ctx, l.LeaseID)
	case OutcomeReject:
		err = ops.Reject(ctx, l.LeaseID, o.reason)
		res.DeadLettered = err == nil
	default:
		var out rheo.RetryOutcome
		out, err = ops.Retry(ctx, l.LeaseID, &rheo.RetryOptions{Reason: o.reason, Delay: o.delay})
		res.DeadLettered = out == rheo.DeadLettered
	}
	return res, handlerErr, err
}
