package softstop_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/internal/softstop"
)

func TestBound(t *testing.T) {
	t.Parallel()
	t.Run("ends when the clock passes the timeout", func(t *testing.T) {
		clock := drivertest.NewClock()
		ctx, release := softstop.Bound(clock, time.Minute)
		defer release()
		clock.Advance(59 * time.Second)
		assert.NoError(t, ctx.Err())
		clock.Advance(time.Second)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the bound did not end")
		}
		assert.ErrorIs(t, context.Cause(ctx), context.DeadlineExceeded)
	})
	t.Run("a negative timeout never ends", func(t *testing.T) {
		clock := drivertest.NewClock()
		ctx, release := softstop.Bound(clock, -1)
		clock.Advance(1000 * time.Hour)
		assert.NoError(t, ctx.Err())
		release()
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
	})
	t.Run("OnCancel runs the stop once ctx ends", func(t *testing.T) {
		clock := drivertest.NewClock()
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan context.Context, 1)
		watch := softstop.OnCancel(ctx, clock, time.Minute, func(bound context.Context) { stopped <- bound })
		defer watch()
		cancel()
		select {
		case bound := <-stopped:
			require.NotNil(t, bound)
		case <-time.After(10 * time.Second):
			require.FailNow(t, "the stop did not run")
		}
	})
}
