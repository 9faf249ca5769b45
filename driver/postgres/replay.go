package postgres

import (
	"context"

	"github.com/rheo-go/rheo"
)

// Replay makes events claimable again for a group and returns how many.
func (o *ops) Replay(ctx context.Context, stream, group string, opts *rheo.ReplayOptions) (int64, error) {
	if opts == nil {
		opts = &rheo.ReplayOptions{}
	}
	clock, err := o.clockArg()
	if err != nil {
		return 0, err
	}
	var n int64
	err = o.runReadCommitted(ctx, "replay", `SELECT rheo.replay(stream => $1, group_name => $2, from_sequence => $3,
			event_ids => $4, from_ts => $5, partitions => $6, clock => $7)`,
		[]any{stream, group, opts.FromSequence, opts.EventIDs, boundArg(opts.FromTS),
			partitionArray(opts.Partitions), clock}, &n)
	return n, err
}
