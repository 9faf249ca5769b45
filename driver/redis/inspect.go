package redis

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

func isNil(err error) bool { return errors.Is(err, goredis.Nil) }

func asError(err error, target **rheo.Error) bool { return errors.As(err, target) }

// parseSeq reads a sequence the scripts return as text.
func parseSeq(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// Lag reports the group's frontier, high watermark and lag per
// partition; nil partitions means all.
func (d *Driver) Lag(ctx context.Context, stream, group string, partitions []int) (rheo.Lag, error) {
	if err := checkTexts(stream, group); err != nil {
		return rheo.Lag{}, err
	}
	v, err := d.call(ctx, scriptLag, stream, nil, noClock, stream, group, scopeArg(partitions))
	if err != nil {
		return rheo.Lag{}, err
	}
	lag := rheo.Lag{Partitions: []rheo.PartitionLag{}}
	seen := map[int]bool{}
	for _, r := range v.([]any) {
		f := r.([]any)
		p := int(f[0].(int64))
		if seen[p] {
			continue
		}
		seen[p] = true
		pl := rheo.PartitionLag{Partition: p, Frontier: parseSeq(f[1]), HighWatermark: parseSeq(f[2])}
		pl.Lag = max(0, pl.HighWatermark-pl.Frontier)
		lag.Partitions = append(lag.Partitions, pl)
		lag.Total += pl.Lag
	}
	slices.SortFunc(lag.Partitions, func(a, b rheo.PartitionLag) int { return cmp.Compare(a.Partition, b.Partition) })
	return lag, nil
}

// ListStreams lists the streams ordered by name: the names of the stream
// list, each read on its own slot.
func (d *Driver) ListStreams(ctx context.Context) ([]rheo.StreamSummary, error) {
	names, err := d.client.ZRange(ctx, keyStreams, 0, -1).Result()
	if err != nil {
		return nil, interpretError("list_streams", err, false)
	}
	cmds := make([]*goredis.SliceCmd, len(names))
	_, err = d.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, name := range names {
			cmds[i] = p.HMGet(ctx, prefix(name)+"meta", "n", "c")
		}
		return nil
	})
	if err != nil && !isNil(err) {
		return nil, interpretError("list_streams", err, false)
	}
	out := []rheo.StreamSummary{}
	for i, name := range names {
		vals := cmds[i].Val()
		if len(vals) != 2 || vals[0] == nil {
			continue
		}
		n, _ := strconv.Atoi(vals[0].(string))
		created, err := decTime(vals[1].(string))
		if err != nil {
			return nil, &rheo.FailedError{Op: "list_streams", Err: err}
		}
		out = append(out, rheo.StreamSummary{Name: name, PartitionCount: n, CreatedAt: created})
	}
	return out, nil
}

// ListGroups lists a stream's groups ordered by name.
func (d *Driver) ListGroups(ctx context.Context, stream string) ([]rheo.GroupSummary, error) {
	if err := checkTexts(stream); err != nil {
		return nil, err
	}
	v, err := d.call(ctx, scriptListGroups, stream, nil, noClock, stream)
	if err != nil {
		return nil, err
	}
	out := []rheo.GroupSummary{}
	for _, r := range v.([]any) {
		f := r.([]any)
		ma := int(parseSeq(f[1]))
		created, err := decTime(f[2].(string))
		if err != nil {
			return nil, &rheo.FailedError{Op: "list_groups", Err: err}
		}
		out = append(out, rheo.GroupSummary{Name: f[0].(string), MaxAttempts: ma, CreatedAt: created, Ordering: rheo.Ordering(f[3].(string))})
	}
	return out, nil
}

// DeadLetters pages through a group's dead letters in (partition,
// sequence) order. opts may be nil.
func (d *Driver) DeadLetters(ctx context.Context, stream, group string, opts *rheo.DeadLetterOptions) ([]rheo.DeadLetter, error) {
	opts = driverutil.WithDefaults(opts)
	if err := checkTexts(stream, group, opts.After); err != nil {
		return nil, err
	}
	var argErr error
	if opts.MaxCount < 0 {
		argErr = rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", opts.MaxCount)
	}
	v, err := d.call(ctx, scriptDeadLetters, stream, argErr, noClock, stream, group, max(opts.MaxCount, 0), opts.After)
	if err != nil {
		return nil, err
	}
	out := []rheo.DeadLetter{}
	for _, r := range v.([]any) {
		f := r.([]any)
		ev, err := decodeFields(stream, f[5].([]any))
		if err != nil {
			return nil, &rheo.FailedError{Op: "dead_letters", Err: err}
		}
		ev.Partition, ev.Sequence = int(f[0].(int64)), f[1].(int64)
		at, err := decTime(f[4].(string))
		if err != nil {
			return nil, &rheo.FailedError{Op: "dead_letters", Err: err}
		}
		out = append(out, rheo.DeadLetter{Event: ev, Attempt: int(f[2].(int64)), Reason: f[3].(string), DeadLetteredAt: at})
	}
	return out, nil
}

// GroupInfo summarises a group's state. Its oldest unsettled ts reads the
// events past each frontier: the cost grows with the lag.
func (d *Driver) GroupInfo(ctx context.Context, stream, group string) (rheo.GroupInfo, error) {
	if err := checkTexts(stream, group); err != nil {
		return rheo.GroupInfo{}, err
	}
	now, err := d.now()
	if err != nil {
		return rheo.GroupInfo{}, err
	}
	v, err := d.call(ctx, scriptGroupInfo, stream, nil, now, stream, group)
	if err != nil {
		return rheo.GroupInfo{}, err
	}
	f := v.([]any)
	var info rheo.GroupInfo
	for _, r := range f[0].([]any) {
		pf := r.([]any)
		info.Lag += max(0, parseSeq(pf[1])-parseSeq(pf[0]))
	}
	info.InFlight, info.PendingRetry, info.DeadLetters = f[1].(int64), f[2].(int64), f[3].(int64)
	if s := f[4].(string); s != "" {
		ts, err := decTime(s)
		if err != nil {
			return rheo.GroupInfo{}, &rheo.FailedError{Op: "group_info", Err: err}
		}
		info.OldestUnsettledTS = &ts
	}
	return info, nil
}

// Leases lists the group's deliveries in progress, the soonest due first.
func (d *Driver) Leases(ctx context.Context, stream, group string, maxCount int) ([]rheo.Delivery, error) {
	if err := checkTexts(stream, group); err != nil {
		return nil, err
	}
	maxCount = driverutil.LeaseCount(maxCount)
	var argErr error
	if maxCount < 0 {
		argErr = rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", maxCount)
	}
	v, err := d.call(ctx, scriptLeases, stream, argErr, noClock, stream, group, max(maxCount, 0))
	if err != nil {
		return nil, err
	}
	out := []rheo.Delivery{}
	for _, r := range v.([]any) {
		f := r.([]any)
		del := rheo.Delivery{EventID: f[0].(string), Partition: int(f[1].(int64)), Sequence: f[2].(int64),
			State: f[3].(string), ConsumerID: f[4].(string), Attempt: int(f[5].(int64)), Reason: f[8].(string)}
		if s := f[6].(string); s != "" {
			t, err := decTime(s)
			if err != nil {
				return nil, &rheo.FailedError{Op: "leases", Err: err}
			}
			del.LeasedAt = &t
		}
		x, err := decTime(f[7].(string))
		if err != nil {
			return nil, &rheo.FailedError{Op: "leases", Err: err}
		}
		del.ExpiresAt = x
		out = append(out, del)
	}
	return out, nil
}

// StreamInfo reports a stream's retention and the low and high watermarks
// of each partition.
func (d *Driver) StreamInfo(ctx context.Context, stream string) (rheo.StreamInfo, error) {
	if err := checkTexts(stream); err != nil {
		return rheo.StreamInfo{}, err
	}
	v, err := d.call(ctx, scriptStreamInfo, stream, nil, noClock, stream)
	if err != nil {
		return rheo.StreamInfo{}, err
	}
	f := v.([]any)
	var info rheo.StreamInfo
	if age := f[0].(string); age != "" {
		us, _ := strconv.ParseInt(age, 10, 64)
		info.MaxAge = time.Duration(us) * time.Microsecond
	}
	info.Partitions = []rheo.PartitionRange{}
	for p, r := range f[1].([]any) {
		pr := r.([]any)
		info.Partitions = append(info.Partitions, rheo.PartitionRange{Partition: p, LowWatermark: parseSeq(pr[0]), HighWatermark: parseSeq(pr[1])})
	}
	return info, nil
}

// Replay makes events claimable again for a group: from a sequence, from
// a time (each partition read from its oldest event for the first one at
// or after it), or by event ids.
func (d *Driver) Replay(ctx context.Context, stream, group string, opts *rheo.ReplayOptions) (int64, error) {
	if opts == nil {
		opts = &rheo.ReplayOptions{}
	}
	if err := checkTexts(append([]string{stream, group}, opts.EventIDs...)...); err != nil {
		return 0, err
	}
	now, err := d.now()
	if err != nil {
		return 0, err
	}
	set := 0
	if opts.FromSequence != nil {
		set++
	}
	if opts.EventIDs != nil {
		set++
	}
	if opts.FromTS != nil {
		set++
	}
	var argErr error
	args := []any{stream, group, "", scopeArg(opts.Partitions)}
	switch {
	case set != 1:
		argErr = rheo.Errorf(rheo.ErrInvalidReplayOpts, "give exactly one of from_sequence, event_ids and from_ts")
	case opts.FromSequence != nil:
		argErr = driverutil.CheckSequence("from_sequence", *opts.FromSequence)
		args[2] = "seq"
		args = append(args, strconv.FormatInt(max(*opts.FromSequence, 0), 10))
	case opts.FromTS != nil:
		args[2] = "ts"
		args = append(args, encBound(*opts.FromTS))
	default:
		args[2] = "ids"
		for _, id := range opts.EventIDs {
			args = append(args, id)
		}
	}
	v, err := d.call(ctx, scriptReplay, stream, argErr, now, args...)
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}
