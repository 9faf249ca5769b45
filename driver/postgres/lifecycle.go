package postgres

import (
	"context"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// DropGroup removes a group with its deliveries, dead letters and
// cursors: one call of rheo.drop_group.
func (o *ops) DropGroup(ctx context.Context, stream, group string, confirm bool) error {
	return o.runReadCommitted(ctx, "drop_group", `SELECT rheo.drop_group(stream => $1, group_name => $2, confirm => $3)`,
		[]any{stream, group, confirm})
}

// DropStream removes a stream, its groups and every event, and returns
// how many events it deleted: one call of rheo.drop_stream.
func (o *ops) DropStream(ctx context.Context, stream string, confirm bool) (int64, error) {
	var n int64
	err := o.runReadCommitted(ctx, "drop_stream", `SELECT rheo.drop_stream(stream => $1, confirm => $2)`,
		[]any{stream, confirm}, &n)
	return n, err
}

// SetRetention sets a stream's max age, in whole microseconds; 0 passes
// NULL, which removes it.
func (o *ops) SetRetention(ctx context.Context, stream string, maxAge time.Duration) error {
	var interval pgtype.Interval
	if maxAge != 0 {
		interval = pgtype.Interval{Microseconds: driver.Micros(maxAge), Valid: true}
	}
	return o.run(ctx, "set_retention", true, func(q querier) error {
		_, err := q.Exec(ctx, `SELECT rheo.set_retention(stream => $1, max_age => $2)`, stream, interval)
		return err
	})
}

// SetOrdering changes a group's ordering: one call of rheo.set_ordering,
// which checks the word (anything but none, key and partition is
// invalid_argument, after stream_not_found and group_not_found).
func (o *ops) SetOrdering(ctx context.Context, stream, group string, ordering rheo.Ordering) error {
	return o.runReadCommitted(ctx, "set_ordering", `SELECT rheo.set_ordering(stream => $1, group_name => $2, ordering => $3)`,
		[]any{stream, group, string(ordering)})
}

// Prune deletes up to MaxCount of a stream's events past its retention
// and returns how many: one call of rheo.prune. opts may be nil.
func (o *ops) Prune(ctx context.Context, stream string, opts *rheo.PruneOptions) (int64, error) {
	if opts == nil {
		opts = &rheo.PruneOptions{}
	}
	maxCount := opts.MaxCount
	if maxCount == 0 {
		maxCount = driver.DefaultPruneCount
	}
	clock, err := o.clockArg()
	if err != nil {
		return 0, err
	}
	var n int64
	err = o.runReadCommitted(ctx, "prune", `SELECT rheo.prune(stream => $1, max_count => $2, force => $3, clock => $4)`,
		[]any{stream, clampInt32(maxCount), opts.Force, clock}, &n)
	return n, err
}

// StreamInfo reports a stream's retention and each partition's low and
// high watermarks: one call of rheo.stream_info.
func (o *ops) StreamInfo(ctx context.Context, stream string) (rheo.StreamRange, error) {
	info := rheo.StreamRange{Partitions: []rheo.PartitionRange{}}
	err := o.run(ctx, "stream_info", false, func(q querier) error {
		rows, err := q.Query(ctx, `SELECT i."partition", i.low_watermark, i.high_watermark, i.max_age
			FROM rheo.stream_info(stream => $1) AS i`, stream)
		if err != nil {
			return err
		}
		var p rheo.PartitionRange
		var maxAge pgtype.Interval
		_, err = pgx.ForEachRow(rows, []any{&p.Partition, &p.LowWatermark, &p.HighWatermark, &maxAge}, func() error {
			info.Partitions = append(info.Partitions, p)
			info.MaxAge = intervalDuration(maxAge)
			return nil
		})
		return err
	})
	if err != nil {
		return rheo.StreamRange{}, err
	}
	return info, nil
}

// intervalDuration converts a retention read back from SQL, where it may
// have been set in months or days, with PostgreSQL's own equivalences
// for comparing intervals (a month is 30 days, a day 24 hours). An
// interval longer than time.Duration holds (about 292 years) is read as
// the longest Duration; NULL is 0.
func intervalDuration(iv pgtype.Interval) time.Duration {
	if !iv.Valid {
		return 0
	}
	const day = int64(24 * time.Hour)
	ns, ok := mulAdd(0, iv.Microseconds, int64(time.Microsecond))
	if ok {
		ns, ok = mulAdd(ns, int64(iv.Days), day)
	}
	if ok {
		ns, ok = mulAdd(ns, int64(iv.Months), 30*day)
	}
	if !ok {
		// Retentions are positive: a negative interval cannot be stored.
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}

// mulAdd returns acc + n*unit, and false when that overflows an int64.
func mulAdd(acc, n, unit int64) (int64, bool) {
	if n > math.MaxInt64/unit || n < math.MinInt64/unit {
		return 0, false
	}
	sum := acc + n*unit
	if (n > 0 && sum < acc) || (n < 0 && sum > acc) {
		return 0, false
	}
	return sum, true
}
