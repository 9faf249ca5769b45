package driver

import (
	"context"
	"errors"

	"github.com/rheo-go/rheo"
)

// PartitionCount is how many events an operation touched in one
// partition.
type PartitionCount struct {
	// Partition is the partition number.
	Partition int `json:"partition"`
	// Events is the number of events.
	Events int64 `json:"events"`
}

// ErrNoTransactions is ReplayByPartition's error for a driver that is no
// Transactor: it cannot count a replay without making it.
var ErrNoTransactions = errors.New("the driver cannot run a replay in a transaction (it is no driver.Transactor)")

// ReplayByPartitionOptions are the optional settings of ReplayByPartition.
// A nil *ReplayByPartitionOptions means the defaults.
type ReplayByPartitionOptions struct {
	// Partitions are the partitions to replay, in this order. Defaults to
	// nil: every partition of the stream.
	Partitions []int
	// DryRun rolls the transaction back: the counts are exact, and
	// nothing changes. Defaults to false: the replay commits.
	DryRun bool
	// Progress, when set, is called before each partition's replay with
	// its index (from 0), the number of partitions and the partition.
	// Defaults to nil.
	Progress func(i, n, partition int)
}

// errDryRun rolls back the transaction of a dry run.
var errDryRun = errors.New("dry run")

// ReplayByPartition runs replay (opts with each partition in turn as its
// Partitions) for group on stream, partition by partition in one
// transaction of drv, and returns how many events each partition made
// claimable again. A dry run (o.DryRun) rolls the transaction back, so
// its counts come from the database's own replay and nothing changes;
// fetches of the group wait for it meanwhile, as for a replay. It is the
// count of rheo replay --dry-run and of the dashboard's replay form.
//
// Errors are the replay's, stream_not_found and group_not_found (from
// the lag read that lists the partitions when o.Partitions is nil), and
// ErrNoTransactions when drv is no Transactor.
func ReplayByPartition(ctx context.Context, drv Driver, stream, group string, opts *rheo.ReplayOptions,
	o *ReplayByPartitionOptions) ([]PartitionCount, error) {
	if o == nil {
		o = &ReplayByPartitionOptions{}
	}
	tr, ok := drv.(Transactor)
	if !ok {
		return nil, ErrNoTransactions
	}
	partitions := o.Partitions
	if partitions == nil {
		lag, err := drv.Lag(ctx, stream, group, nil)
		if err != nil {
			return nil, err
		}
		for _, p := range lag.Partitions {
			partitions = append(partitions, p.Partition)
		}
	}
	each := rheo.ReplayOptions{}
	if opts != nil {
		each = *opts
	}
	var counts []PartitionCount
	err := tr.InTx(ctx, func(ctx context.Context, tx Tx) error {
		counts = counts[:0]
		for i, p := range partitions {
			if o.Progress != nil {
				o.Progress(i, len(partitions), p)
			}
			each.Partitions = []int{p}
			n, err := tx.Replay(ctx, stream, group, &each)
			if err != nil {
				return err
			}
			counts = append(counts, PartitionCount{Partition: p, Events: n})
		}
		if o.DryRun {
			return errDryRun
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return nil, err
	}
	return counts, nil
}
