package redis

import (
	"context"
	"math"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

func checkTexts(texts ...string) error {
	for _, text := range texts {
		if err := driverutil.CheckText("text argument", text); err != nil {
			return err
		}
	}
	return nil
}

// CreateStream creates a stream with partitionCount partitions. The
// stream gets its number, which its lease ids carry, and its place in
// the stream list first (on the slot of those keys), then its own keys
// (on its slot); a stream exists once the second step is done.
func (d *Driver) CreateStream(ctx context.Context, stream string, partitionCount int) error {
	if err := checkTexts(stream); err != nil {
		return err
	}
	now, err := d.now()
	if err != nil {
		return err
	}
	if !validName.MatchString(stream) {
		return rheo.Errorf(rheo.ErrInvalidArgument, "invalid stream name %q: %s", stream, nameRule)
	}
	var argErr error
	if partitionCount < 1 || partitionCount > driverutil.MaxPartitionCount {
		argErr = rheo.Errorf(rheo.ErrInvalidPartitionCount, "partition_count must be between 1 and %d, got %d",
			driverutil.MaxPartitionCount, partitionCount)
	}
	num := int64(0)
	if argErr == nil {
		exists, err := d.client.Exists(ctx, prefix(stream)+"meta").Result()
		if err != nil {
			return interpretError("create_stream", err, false)
		}
		if exists == 0 {
			num, err = registerScript.Run(ctx, d.client, []string{keyNextNum, keyStreamNums, keyStreams}, stream).Int64()
			if err != nil {
				return interpretError("create_stream", err, true)
			}
			d.names.Store(uint64(num), stream)
		} else {
			// The stream exists (the script says already_exists): it goes
			// back into the list, should a failover have lost it there.
			_ = d.client.ZAddNX(ctx, keyStreams, goredis.Z{Member: stream}).Err()
		}
	}
	_, err = d.call(ctx, scriptCreateStream, stream, argErr, now, stream, partitionCount, num)
	return err
}

// start is where create_group and reset_group place cursors.
type start struct {
	after *int64
	at    *time.Time
}

func (st start) check() error {
	if st.after != nil && st.at != nil {
		return rheo.Errorf(rheo.ErrInvalidArgument, "give start_after or start_at, not both")
	}
	if st.after != nil {
		return driverutil.CheckSequence("start_after", *st.after)
	}
	return nil
}

// args renders st for the scripts: start after, start after + 1, start
// at.
func (st start) args() []any {
	after, after1, at := "", "", ""
	if st.after != nil && *st.after < math.MaxInt64 {
		after = strconv.FormatInt(*st.after, 10)
		after1 = strconv.FormatInt(*st.after+1, 10)
	}
	if st.at != nil {
		at = encBound(*st.at)
	}
	return []any{after, after1, at}
}

// checkOrdering reports a word other than none, key and partition as
// invalid_argument.
func checkOrdering(o rheo.Ordering) error {
	switch o {
	case rheo.OrderingNone, rheo.OrderingKey, rheo.OrderingPartition:
		return nil
	}
	return rheo.Errorf(rheo.ErrInvalidArgument, "ordering must be none, key or partition, got %q", string(o))
}

// CreateGroup creates a consumer group. opts may be nil.
func (d *Driver) CreateGroup(ctx context.Context, stream, group string, opts *rheo.CreateGroupOptions) error {
	opts = driverutil.WithDefaults(opts)
	if _, err := driverutil.Int32("max_attempts", opts.MaxAttempts); err != nil {
		return err
	}
	if err := checkTexts(stream, group, string(opts.Ordering)); err != nil {
		return err
	}
	now, err := d.now()
	if err != nil {
		return err
	}
	st := start{after: opts.StartAfter, at: opts.StartAt}
	var argErr error
	switch {
	case !validName.MatchString(group):
		argErr = rheo.Errorf(rheo.ErrInvalidArgument, "invalid group name %q: %s", group, nameRule)
	case opts.MaxAttempts < 1:
		argErr = rheo.Errorf(rheo.ErrInvalidArgument, "max_attempts must be >= 1, got %d", opts.MaxAttempts)
	default:
		argErr = st.check()
	}
	ordErr := checkOrdering(opts.Ordering)
	args := []any{stream, group, opts.MaxAttempts, string(opts.Ordering)}
	args = append(args, st.args()...)
	args = append(args, scopeArg(opts.Partitions), argWords(ordErr))
	_, err = d.call(ctx, scriptCreateGroup, stream, argErr, now, args...)
	return err
}

// ResetGroup drops a group's deliveries and places its cursors anew.
func (d *Driver) ResetGroup(ctx context.Context, stream, group string, opts *rheo.ResetOptions) error {
	if opts == nil || !opts.Confirm {
		return rheo.Errorf(rheo.ErrConfirmRequired, "reset_group drops leases, retries and dead letters: call it with confirm")
	}
	if err := checkTexts(stream, group); err != nil {
		return err
	}
	now, err := d.now()
	if err != nil {
		return err
	}
	st := start{after: opts.StartAfter, at: opts.StartAt}
	args := []any{stream, group}
	args = append(args, st.args()...)
	args = append(args, scopeArg(opts.Partitions))
	_, err = d.call(ctx, scriptReset, stream, st.check(), now, args...)
	return err
}

func confirmRequired(op, what string) error {
	return rheo.Errorf(rheo.ErrConfirmRequired, "%s %s: call it with confirm", op, what)
}

// DropGroup removes a group with its deliveries, dead letters and
// cursors; its leases become stale.
func (d *Driver) DropGroup(ctx context.Context, stream, group string, opts *rheo.DropOptions) error {
	if opts == nil || !opts.Confirm {
		return confirmRequired("drop_group", "removes the group with its deliveries, dead letters and cursors")
	}
	if err := checkTexts(stream, group); err != nil {
		return err
	}
	_, err := d.call(ctx, scriptDropGroup, stream, nil, noClock, stream, group)
	return err
}

// DropStream removes a stream, its groups and every event, and returns
// how many events it deleted; then it leaves the stream list.
func (d *Driver) DropStream(ctx context.Context, stream string, opts *rheo.DropOptions) (int64, error) {
	if opts == nil || !opts.Confirm {
		return 0, confirmRequired("drop_stream", "removes the stream, its groups and every event")
	}
	if err := checkTexts(stream); err != nil {
		return 0, err
	}
	v, err := d.call(ctx, scriptDropStream, stream, nil, noClock, stream)
	if err != nil {
		return 0, err
	}
	// A name left in the list without its stream is not shown, so a
	// failure here hides nothing and is not reported.
	_ = d.client.ZRem(ctx, keyStreams, stream).Err()
	return v.(int64), nil
}

// SetRetention sets the age past which Prune may delete a stream's
// events; 0 removes the retention.
func (d *Driver) SetRetention(ctx context.Context, stream string, maxAge time.Duration) error {
	if err := checkTexts(stream); err != nil {
		return err
	}
	us := driverutil.Micros(maxAge)
	var argErr error
	age := ""
	switch {
	case maxAge == 0:
	case us <= 0:
		argErr = rheo.Errorf(rheo.ErrInvalidArgument, "max_age must be positive, got %s", maxAge)
	default:
		age = strconv.FormatInt(us, 10)
	}
	_, err := d.call(ctx, scriptRetention, stream, argErr, noClock, stream, age)
	return err
}

// SetOrdering changes a group's ordering from its next fetch on.
func (d *Driver) SetOrdering(ctx context.Context, stream, group string, ordering rheo.Ordering) error {
	if err := checkTexts(stream, group, string(ordering)); err != nil {
		return err
	}
	now, err := d.now()
	if err != nil {
		return err
	}
	_, err = d.call(ctx, scriptOrdering, stream, checkOrdering(ordering), now, stream, group, string(ordering))
	return err
}

// Prune deletes, partition by partition, the oldest events older than
// the stream's retention that every group has passed (every such event
// with opts.Force), at most opts.MaxCount per call, with XTRIM MINID.
// opts may be nil.
func (d *Driver) Prune(ctx context.Context, stream string, opts *rheo.PruneOptions) (int64, error) {
	opts = driverutil.WithDefaults(opts)
	if err := checkTexts(stream); err != nil {
		return 0, err
	}
	now, err := d.now()
	if err != nil {
		return 0, err
	}
	var argErr error
	if opts.MaxCount < 0 {
		argErr = rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", opts.MaxCount)
	}
	force := ""
	if opts.Force {
		force = "1"
	}
	for {
		age, err := d.client.HGet(ctx, prefix(stream)+"meta", "age").Result()
		if err != nil && !isNil(err) {
			return 0, interpretError("prune", err, false)
		}
		cutoff := ""
		if age != "" {
			us, _ := strconv.ParseInt(age, 10, 64)
			cut := now.t.Add(-time.Duration(us) * time.Microsecond)
			if us > math.MaxInt64/1000 || cut.Before(driverutil.MinTime) {
				cutoff = "-"
			} else {
				cutoff = encTime(cut)
			}
		}
		v, err := d.call(ctx, scriptPrune, stream, argErr, now, stream, opts.MaxCount, force, cutoff, age)
		if err != nil {
			return 0, err
		}
		if n := v.(int64); n >= 0 {
			return n, nil
		}
	}
}
