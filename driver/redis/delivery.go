package redis

import (
	"context"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	goredis "github.com/redis/go-redis/v9"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// scopeArg renders a partitions argument for the scripts: "*" for nil
// (every partition), else the numbers, comma-separated.
func scopeArg(partitions []int) string {
	if partitions == nil {
		return "*"
	}
	parts := make([]string, len(partitions))
	for i, p := range partitions {
		parts[i] = strconv.Itoa(p)
	}
	return strings.Join(parts, ",")
}

// Fetch claims up to MaxCount events for one consumer, in one script:
// round-robin over the partitions with claimable work, from a partition
// that rotates with every fetch of the group. opts may be nil.
func (d *Driver) Fetch(ctx context.Context, stream, group string, opts *rheo.FetchOptions) ([]rheo.Lease, error) {
	opts = driverutil.WithDefaults(opts)
	for _, text := range []string{stream, group, opts.ConsumerID} {
		if err := driverutil.CheckText("text argument", text); err != nil {
			return nil, err
		}
	}
	now, err := d.now()
	if err != nil {
		return nil, err
	}
	ms, err := driverutil.Millis("lease_ms", opts.LeaseDuration)
	if err != nil {
		return nil, err
	}
	var argErr error
	switch {
	case opts.MaxCount < 0:
		argErr = rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", opts.MaxCount)
	case ms < 1:
		argErr = rheo.Errorf(rheo.ErrInvalidArgument, "lease_ms must be >= 1, got %d", ms)
	default:
		argErr = driverutil.CheckLength("consumer_id", opts.ConsumerID)
	}
	// An expiry may pass the year 9999 (a clock at the end of the
	// range): the scripts' times have room for it.
	expires := now.t.Add(time.Duration(ms) * time.Millisecond)
	consumer := opts.ConsumerID
	if consumer == "" {
		consumer = "consumer-" + uuid.NewString()
	}
	n := max(opts.MaxCount, 0)
	if argErr != nil {
		n = 0
		expires = now.t
	}
	args := []any{stream, group, n, consumer, encTime(expires), scopeArg(opts.Partitions), leaseSeed()}
	v, err := d.call(ctx, scriptFetch, stream, argErr, now, args...)
	if err != nil {
		return nil, err
	}
	rows := v.([]any)
	if len(rows) == 0 {
		return []rheo.Lease{}, nil
	}
	d.learnStream(ctx, stream, rows[0].([]any)[0].(string))
	at := make([]position, len(rows))
	for i, r := range rows {
		f := r.([]any)
		at[i] = position{partition: int(f[1].(int64)), sequence: f[2].(int64)}
	}
	events, err := d.readEvents(ctx, stream, at)
	if err != nil {
		// The leases are made, and will expire: the caller cannot know.
		return nil, interpretError("fetch", err, true)
	}
	leases := make([]rheo.Lease, 0, len(rows))
	for i, r := range rows {
		f := r.([]any)
		ev, ok := events[at[i]]
		if !ok {
			// The entry left the stream behind Rheo's back (XDEL): its
			// lease expires, and its settles fail receipt_mismatch.
			continue
		}
		lid := f[0].(string)
		leases = append(leases, rheo.Lease{
			LeaseID: lid, Receipt: lid, Group: group, ConsumerID: consumer, Attempt: int(f[3].(int64)),
			LeasedAt: now.t.UTC(), ExpiresAt: expires.UTC(), Event: ev,
		})
	}
	return leases, nil
}

// leaseStream finds the stream of a lease id from the number in its
// first 32 bits; an id the driver cannot have issued is stale.
func (d *Driver) leaseStream(ctx context.Context, op, leaseID string) (string, string, error) {
	id, err := driverutil.ParseLeaseID(leaseID)
	if err != nil {
		return "", "", err
	}
	num := streamNumber(id)
	if name, ok := d.names.Load(num); ok {
		return name.(string), id, nil
	}
	stale := rheo.Errorf(rheo.ErrStaleLease, "lease %s was never issued", id)
	if num == 0 {
		return "", "", stale
	}
	name, err := d.client.HGet(ctx, keyStreamNums, strconv.FormatUint(num, 10)).Result()
	if err != nil {
		if isNil(err) {
			return "", "", stale
		}
		return "", "", interpretError(op, err, false)
	}
	d.names.Store(num, name)
	return name, id, nil
}

// position is an event's place in its stream.
type position struct {
	partition int
	sequence  int64
}

// runGap is the widest gap between two sequences of a partition that one
// XRANGE of readEvents reads over rather than splitting the read.
const runGap = 16

// readEvents reads the events at the given positions of stream, in one
// pipeline of XRANGEs (one per run of close sequences of a partition,
// all on the stream's slot). Events are immutable, so reading them after
// the fetch script is reading what it leased; a position whose entry is
// gone is missing from the result.
func (d *Driver) readEvents(ctx context.Context, stream string, at []position) (map[position]rheo.Event, error) {
	byPartition := map[int][]int64{}
	for _, pos := range at {
		byPartition[pos.partition] = append(byPartition[pos.partition], pos.sequence)
	}
	type run struct {
		partition int
		cmd       *goredis.XMessageSliceCmd
	}
	var runs []run
	_, err := d.client.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
		for p, seqs := range byPartition {
			slices.Sort(seqs)
			key := prefix(stream) + "e:" + strconv.Itoa(p)
			lo := seqs[0]
			for i := 1; i <= len(seqs); i++ {
				if i < len(seqs) && seqs[i]-seqs[i-1] <= runGap {
					continue
				}
				hi := seqs[i-1]
				runs = append(runs, run{p, pipe.XRange(ctx, key, strconv.FormatInt(lo, 10)+"-0", strconv.FormatInt(hi, 10)+"-0")})
				if i < len(seqs) {
					lo = seqs[i]
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	events := make(map[position]rheo.Event, len(at))
	for _, r := range runs {
		for _, m := range r.cmd.Val() {
			ev, err := messageEvent(stream, r.partition, m)
			if err != nil {
				return nil, err
			}
			events[position{r.partition, ev.Sequence}] = ev
		}
	}
	return events, nil
}

// streamNumber is the stream number in the first 32 bits of a lease id
// in canonical form.
func streamNumber(id string) uint64 {
	b, _ := hex.DecodeString(id[:8])
	return uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
}

// learnStream records the number of a stream a fetch leased from. The
// first time this Driver sees it, it also writes it into the numbers'
// map (HSETNX), so that a map that lost it (a failover of its node, a
// key deleted by hand) is repaired for the other processes' settles.
func (d *Driver) learnStream(ctx context.Context, stream, leaseID string) {
	num := streamNumber(leaseID)
	if _, seen := d.names.LoadOrStore(num, stream); seen {
		return
	}
	// Best effort: the settles of this Driver need only its cache.
	_ = d.client.HSetNX(ctx, keyStreamNums, strconv.FormatUint(num, 10), stream).Err()
}

// Renew extends a held lease to clock+dur and returns the new expiry.
func (d *Driver) Renew(ctx context.Context, leaseID string, dur time.Duration) (time.Time, error) {
	now, err := d.now()
	if err != nil {
		return time.Time{}, err
	}
	ms, err := driverutil.Millis("lease_ms", dur)
	if err != nil {
		return time.Time{}, err
	}
	if ms < 1 {
		return time.Time{}, rheo.Errorf(rheo.ErrInvalidArgument, "lease_ms must be >= 1, got %d", ms)
	}
	expires := now.t.Add(time.Duration(ms) * time.Millisecond)
	stream, id, err := d.leaseStream(ctx, "renew", leaseID)
	if err != nil {
		return time.Time{}, err
	}
	if _, err := d.call(ctx, scriptRenew, stream, nil, now, id, encTime(expires)); err != nil {
		return time.Time{}, err
	}
	return expires.UTC(), nil
}

// Ack settles a held lease as done.
func (d *Driver) Ack(ctx context.Context, leaseID string) error {
	results, err := d.ack(ctx, "ack", []string{leaseID})
	if err != nil {
		return err
	}
	return results[0]
}

// AckBatch acks each lease independently, one script per stream of the
// leases; stale ones (and repeats of an id in the batch) report OK=false.
func (d *Driver) AckBatch(ctx context.Context, leaseIDs []string) ([]rheo.AckResult, error) {
	results, err := d.ack(ctx, "ack_batch", leaseIDs)
	if err != nil {
		return nil, err
	}
	out := make([]rheo.AckResult, len(leaseIDs))
	for i, id := range leaseIDs {
		out[i] = rheo.AckResult{LeaseID: id, OK: results[i] == nil}
	}
	return out, nil
}

// ack settles leaseIDs and returns each one's outcome: nil, or the error
// of why it was not held. The error is for the call as a whole.
func (d *Driver) ack(ctx context.Context, op string, leaseIDs []string) ([]error, error) {
	now, err := d.now()
	if err != nil {
		return nil, err
	}
	results := make([]error, len(leaseIDs))
	byStream := map[string][]int{}
	var order []string
	seen := map[string]bool{}
	for i, raw := range leaseIDs {
		stream, id, err := d.leaseStream(ctx, op, raw)
		if err != nil {
			if !isStale(err) {
				return nil, err
			}
			results[i] = err
			continue
		}
		if seen[id] {
			results[i] = rheo.Errorf(rheo.ErrStaleLease, "lease %s appears earlier in the batch", id)
			continue
		}
		seen[id] = true
		if _, ok := byStream[stream]; !ok {
			order = append(order, stream)
		}
		byStream[stream] = append(byStream[stream], i)
		leaseIDs[i] = id
	}
	for _, stream := range order {
		idx := byStream[stream]
		args := make([]any, len(idx))
		for j, i := range idx {
			args[j] = leaseIDs[i]
		}
		v, err := d.call(ctx, scriptAck, stream, nil, now, args...)
		if err != nil {
			return nil, err
		}
		for j, r := range v.([]any) {
			if word, ok := r.(string); ok {
				results[idx[j]] = rheo.Errorf(byReason[word], "lease %s is no longer held", leaseIDs[idx[j]])
			}
		}
	}
	return results, nil
}

func isStale(err error) bool {
	var e *rheo.Error
	return asError(err, &e) && e == rheo.ErrStaleLease
}

// Retry makes the event claimable again after opts.Delay, or
// dead-letters it at the attempt limit. opts may be nil.
func (d *Driver) Retry(ctx context.Context, leaseID string, opts *rheo.RetryOptions) (rheo.RetryOutcome, error) {
	if opts == nil {
		opts = &rheo.RetryOptions{}
	}
	if err := driverutil.CheckText("reason", opts.Reason); err != nil {
		return "", err
	}
	now, err := d.now()
	if err != nil {
		return "", err
	}
	ms, err := driverutil.Millis("delay_ms", opts.Delay)
	if err != nil {
		return "", err
	}
	var argErr error
	if ms < 0 {
		argErr = rheo.Errorf(rheo.ErrInvalidArgument, "delay_ms must be >= 0, got %d", ms)
	}
	due := now.t.Add(time.Duration(ms) * time.Millisecond)
	if argErr != nil {
		due = now.t
	}
	stream, id, err := d.leaseStream(ctx, "retry", leaseID)
	if err != nil {
		if argErr != nil {
			return "", argErr
		}
		return "", err
	}
	v, err := d.call(ctx, scriptRetry, stream, argErr, now, id, opts.Reason, encTime(due))
	if err != nil {
		return "", err
	}
	return rheo.RetryOutcome(v.(string)), nil
}

// Reject dead-letters the event now. An empty reason is stored as
// "rejected".
func (d *Driver) Reject(ctx context.Context, leaseID string, reason string) error {
	if err := driverutil.CheckText("reason", reason); err != nil {
		return err
	}
	now, err := d.now()
	if err != nil {
		return err
	}
	stream, id, err := d.leaseStream(ctx, "reject", leaseID)
	if err != nil {
		return err
	}
	_, err = d.call(ctx, scriptReject, stream, nil, now, id, reason)
	return err
}
