package postgres

import (
	"context"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// DropGroup removes a group with its deliveries, dead letters and
// cursors: one call of rheo.drop_group.
func (o *ops) DropGroup(ctx context.Context, stream, group string, opts *rheo.DropOptions) error {
	confirm := opts != nil && opts.Confirm
	return o.runReadCommitted(ctx, "drop_group", `SELECT rheo.drop_group(stream => $1, group_name => $2, confirm => $3)`,
		[]any{stream, group, confirm})
}

// DropStream removes a stream, its groups and every event, and returns
// how many events it deleted: one call of rheo.drop_stream.
func (o *ops) DropStream(ctx context.Context, stream string, opts *rheo.DropOptions) (int64, error) {
	confirm := opts != nil && opts.Confirm
	var n int64
	err := o.runReadCommitted(ctx, "drop_stream", `SELECT rheo.drop_stream(stream => $1, confirm => $2)`,
		[]any{stream, confirm}, &n)
	return n, err
}

// SetOrdering changes a group's ordering: one call of rheo.set_ordering,
// which checks the word (anything but none, key and partition is
// invalid_argument, after stream_not_found and group_not_found).
func (o *ops) SetOrdering(ctx context.Context, stream, group string, ordering rheo.Ordering) error {
	return o.runReadCommitted(ctx, "set_ordering", `SELECT rheo.set_ordering(stream => $1, group_name => $2, ordering => $3)`,
		[]any{stream, group, string(ordering)})
}

// CreateStream creates a stream with partitionCount partitions (passed
// through: below 1 is invalid_partition_count).
func (o *ops) CreateStream(ctx context.Context, stream string, partitionCount int) error {
	clock, err := o.clockArg()
	if err != nil {
		return err
	}
	return o.run(ctx, "create_stream", true, func(q querier) error {
		_, err := q.Exec(ctx, `SELECT rheo.create_stream(stream => $1, partition_count => $2, clock => $3)`,
			stream, clampInt32(partitionCount), clock)
		return err
	})
}

// CreateGroup creates a consumer group. opts may be nil; an empty
// Ordering is sent as 'none', the SQL default, and any other word as
// given, for rheo.create_group to check.
func (o *ops) CreateGroup(ctx context.Context, stream, group string, opts *rheo.CreateGroupOptions) error {
	opts = driverutil.WithDefaults(opts)
	maxAttempts := opts.MaxAttempts
	// Clamping would store another max_attempts than the one asked for.
	attempts, err := driverutil.Int32("max_attempts", maxAttempts)
	if err != nil {
		return err
	}
	clock, err := o.clockArg()
	if err != nil {
		return err
	}
	ordering := opts.Ordering
	return o.runReadCommitted(ctx, "create_group", `SELECT rheo.create_group(stream => $1, group_name => $2, max_attempts => $3,
			start_after => $4, start_at => $5, partitions => $6, clock => $7, ordering => $8)`,
		[]any{stream, group, attempts, opts.StartAfter, boundArg(opts.StartAt),
			partitionArray(opts.Partitions), clock, string(ordering)})
}

// ResetGroup drops a group's deliveries and places its cursors anew.
func (o *ops) ResetGroup(ctx context.Context, stream, group string, opts *rheo.ResetOptions) error {
	if opts == nil {
		opts = &rheo.ResetOptions{}
	}
	clock, err := o.clockArg()
	if err != nil {
		return err
	}
	return o.runReadCommitted(ctx, "reset_group", `SELECT rheo.reset_group(stream => $1, group_name => $2, confirm => $3,
			start_after => $4, start_at => $5, partitions => $6, clock => $7)`,
		[]any{stream, group, opts.Confirm, opts.StartAfter, boundArg(opts.StartAt),
			partitionArray(opts.Partitions), clock})
}
