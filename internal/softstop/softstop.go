// Package softstop times the soft stop that the worker, the consumer and
// retention's Pruner begin when the context given to their Start ends: a
// stop that lets the work in flight finish, bounded by a timeout after
// which it turns hard.
package softstop

import (
	"context"
	"time"

	"github.com/rheo-go/rheo/driver"
)

// Bound returns a context that ends once clock has moved timeout past
// its time now (cause context.DeadlineExceeded), or never when timeout
// is negative, and the function that releases it. It is what a soft stop
// hands to the Stop that waits for the work in flight: when it ends,
// that Stop turns hard.
func Bound(clock driver.Clock, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	if timeout < 0 {
		return ctx, func() { cancel(nil) }
	}
	fire, release := clock.At(clock.Now().Add(timeout))
	go func() {
		defer release()
		select {
		case <-fire:
			cancel(context.DeadlineExceeded)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// OnCancel runs stop in a goroutine of its own, with a context from Bound,
// once ctx ends. The returned function, called when the run has ended,
// releases the watch (a stop already begun carries on).
func OnCancel(ctx context.Context, clock driver.Clock, timeout time.Duration, stop func(context.Context)) func() bool {
	return context.AfterFunc(ctx, func() {
		bound, release := Bound(clock, timeout)
		defer release()
		stop(bound)
	})
}
