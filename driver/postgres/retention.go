package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// SetRetention sets a stream's max age, in whole microseconds; 0 passes
// NULL, which removes it.
func (o *ops) SetRetention(ctx context.Context, stream string, maxAge time.Duration) error {
	var interval pgtype.Interval
	if maxAge != 0 {
		interval = pgtype.Interval{Microseconds: driverutil.Micros(maxAge), Valid: true}
	}
	return o.run(ctx, "set_retention", true, func(q querier) error {
		_, err := q.Exec(ctx, `SELECT rheo.set_retention(stream => $1, max_age => $2)`, stream, interval)
		return err
	})
}

// Prune deletes up to MaxCount of a stream's events past its retention
// and returns how many: one call of rheo.prune. opts may be nil.
func (o *ops) Prune(ctx context.Context, stream string, opts *rheo.PruneOptions) (int64, error) {
	opts = driverutil.WithDefaults(opts)
	maxCount := opts.MaxCount
	clock, err := o.clockArg()
	if err != nil {
		return 0, err
	}
	var n int64
	err = o.runReadCommitted(ctx, "prune", `SELECT rheo.prune(stream => $1, max_count => $2, force => $3, clock => $4)`,
		[]any{stream, clampInt32(maxCount), opts.Force, clock}, &n)
	return n, err
}
