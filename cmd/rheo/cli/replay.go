package cli

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

func replayCommand() *command {
	return &command{
		name:     "replay",
		synopsis: "STREAM GROUP (--from-sequence N | --event-id ID... | --from-time TIME) [--partition P]... [--dry-run]",
		summary:  "make events claimable again for a group (rewind, or reopen acked and dead-lettered events)",
		args:     []string{"STREAM", "GROUP"},
		details: `Exactly one selector:
  --from-sequence N  every event after sequence N is delivered again, from attempt 1
  --event-id ID      these acked or dead-lettered events are delivered again (repeat the flag)
  --from-time TIME   per partition, from the first event with ts >= TIME (RFC 3339)
Leases held on replayed events become stale; their dead letters are cleared.
Events are never copied: the group's cursors move back.

The replay runs partition by partition in one transaction and prints how
many events each partition made claimable again. --dry-run runs the same
replay and rolls the transaction back, so the counts are exact and nothing
changes (fetches of the group wait for it meanwhile, as for a replay).
On a database without transactions (Redis) each partition's replay is one
atomic call of its own, and --dry-run is refused.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			var (
				fromSequence optionalInt64
				eventIDs     stringList
				fromTime     optionalTime
				partitions   intList
			)
			fs.Var(&fromSequence, "from-sequence", "replay the events after `SEQUENCE`")
			fs.Var(&eventIDs, "event-id", "replay the acked or dead-lettered event with this `ID` (repeat for more)")
			fs.Var(&fromTime, "from-time", "replay from the first event with ts >= `TIME` in each partition")
			fs.Var(&partitions, "partition", "replay in partition `P` only (repeat, or separate with commas)")
			dryRun := fs.Bool("dry-run", false, "count what would be replayed, changing nothing")
			return func(c *call) error {
				c.stream, c.group = c.args[0], c.args[1]
				c.argFlags = map[string]string{"from_sequence": "--from-sequence", "event_ids": "--event-id",
					"from_ts": "--from-time", "partitions": "--partition", "partition": "--partition"}
				selectors := 0
				for _, given := range []bool{fromSequence.value != nil, len(eventIDs) > 0, fromTime.value != nil} {
					if given {
						selectors++
					}
				}
				if selectors != 1 {
					return usagef("give exactly one of --from-sequence, --event-id and --from-time")
				}
				opts := rheo.ReplayOptions{FromSequence: fromSequence.value, EventIDs: eventIDs, FromTS: fromTime.value}
				return c.withDriver(func(drv driver.Driver) error {
					counts, err := c.replay(drv, opts, partitions.sorted(), *dryRun)
					if err != nil {
						return err
					}
					var total int64
					for _, pc := range counts {
						total += pc.Events
					}
					out := struct {
						Stream     string                  `json:"stream"`
						Group      string                  `json:"group"`
						DryRun     bool                    `json:"dry_run"`
						Partitions []driver.PartitionCount `json:"partitions"`
						Total      int64                   `json:"total"`
					}{c.stream, c.group, *dryRun, counts, total}
					return c.emit(out, func(w io.Writer) error {
						header := "REPLAYED"
						if *dryRun {
							header = "WOULD_REPLAY"
						}
						t := newTable("PARTITION", header)
						for _, pc := range counts {
							t.add(pc.Partition, pc.Events)
						}
						t.add("total", total)
						if err := t.write(w); err != nil {
							return err
						}
						if *dryRun {
							_, err := fmt.Fprintln(w, "dry run: nothing was changed")
							return err
						}
						_, err := fmt.Fprintf(w, "see the group's lag with: rheo lag %s %s\n", c.stream, c.group)
						return err
					})
				})
			}
		},
	}
}

// replay replays partition by partition, in one transaction that a dry
// run rolls back (driver.ReplayByPartition), and returns the count of
// each partition. partitions nil means all the stream's partitions. A
// driver without transactions (no driver.Transactor, such as Redis's)
// replays each partition in a call of its own, atomic per partition;
// it cannot count a dry run without replaying, so a dry run is refused
// there and changes nothing.
func (c *call) replay(drv driver.Driver, opts rheo.ReplayOptions, partitions []int, dryRun bool) ([]driver.PartitionCount, error) {
	if _, ok := drv.(driver.Transactor); !ok {
		if dryRun {
			return nil, failf("the %s driver cannot run a replay in a transaction (it is no driver.Transactor), so --dry-run cannot count "+
				"without replaying; nothing was changed; rheo lag %s %s shows the group's progress", c.databaseName(), c.stream, c.group)
		}
		return c.replayEach(drv, opts, partitions)
	}
	prog := c.newProgress()
	counts, err := driver.ReplayByPartition(c.ctx, drv, c.stream, c.group, &opts, &driver.ReplayByPartitionOptions{
		Partitions: partitions,
		DryRun:     dryRun,
		Progress: func(i, n, p int) {
			prog.show("replay: partition %d (%d of %d)", p, i+1, n)
		},
	})
	prog.done()
	return counts, err
}

// replayEach replays partition by partition, each partition's replay one
// call of drv, for a driver without transactions. When a partition's
// replay fails, the partitions before it stay replayed: the error says
// which.
func (c *call) replayEach(drv driver.Driver, opts rheo.ReplayOptions, partitions []int) ([]driver.PartitionCount, error) {
	if partitions == nil {
		lag, err := drv.Lag(c.ctx, c.stream, c.group, nil)
		if err != nil {
			return nil, err
		}
		for _, p := range lag.Partitions {
			partitions = append(partitions, p.Partition)
		}
	}
	prog := c.newProgress()
	defer prog.done()
	counts := make([]driver.PartitionCount, 0, len(partitions))
	for i, p := range partitions {
		prog.show("replay: partition %d (%d of %d)", p, i+1, len(partitions))
		each := opts
		each.Partitions = []int{p}
		n, err := drv.Replay(c.ctx, c.stream, c.group, &each)
		if err != nil {
			if i == 0 {
				return nil, err
			}
			return nil, failf("the replay of partition %d failed: %s; the %d partitions before it (%s) were replayed, "+
				"the others were not: run the command again with --partition for those", p, c.describe(err), i, partitionList(counts))
		}
		counts = append(counts, driver.PartitionCount{Partition: p, Events: n})
	}
	return counts, nil
}

// partitionList lists the partitions of counts, for messages: "0, 1, 2".
func partitionList(counts []driver.PartitionCount) string {
	parts := make([]string, len(counts))
	for i, pc := range counts {
		parts[i] = strconv.Itoa(pc.Partition)
	}
	return strings.Join(parts, ", ")
}

// partitionCount returns the number of partitions of c.stream.
func (c *call) partitionCount(ops driver.Ops) (int, error) {
	streams, err := ops.ListStreams(c.ctx)
	if err != nil {
		return 0, err
	}
	for _, s := range streams {
		if s.Name == c.stream {
			return s.PartitionCount, nil
		}
	}
	return 0, rheo.Errorf(rheo.ErrStreamNotFound, "stream %q does not exist", c.stream)
}

func resetCommand() *command {
	return &command{
		name:     "reset",
		synopsis: "STREAM GROUP --confirm [--start-after N | --start-at TIME] [--partition P]...",
		summary:  "drop a group's leases, pending retries and dead letters, and move its cursors",
		args:     []string{"STREAM", "GROUP"},
		details: `In the partitions reset (--partition, or all), the group forgets its
progress: held leases become stale, retries and dead letters are dropped,
and the cursor moves to the beginning, after --start-after SEQUENCE, or to
the first event with ts >= --start-at TIME. Other partitions keep their
state. Prints the group's lag afterwards.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			confirm := fs.Bool("confirm", false, "really reset the group")
			var startAfter optionalInt64
			var startAt optionalTime
			var partitions intList
			fs.Var(&startAfter, "start-after", "start after `SEQUENCE`: the events up to it are never delivered")
			fs.Var(&startAt, "start-at", "start at the first event with ts >= `TIME`")
			fs.Var(&partitions, "partition", "reset partition `P` only (repeat, or separate with commas)")
			return func(c *call) error {
				c.stream, c.group = c.args[0], c.args[1]
				c.argFlags = map[string]string{"start_after": "--start-after", "start_at": "--start-at",
					"partitions": "--partition", "partition": "--partition"}
				if !*confirm {
					return usagef("--confirm is required: reset drops the group's leases, pending retries and dead letters and moves its cursors; nothing was changed")
				}
				if startAfter.value != nil && startAt.value != nil {
					return usagef("--start-after and --start-at are exclusive")
				}
				return c.withDriver(func(drv driver.Driver) error {
					err := drv.ResetGroup(c.ctx, c.stream, c.group, &rheo.ResetOptions{
						Confirm:    true,
						StartAfter: startAfter.value,
						StartAt:    startAt.value,
						Partitions: partitions.sorted(),
					})
					if err != nil {
						return err
					}
					lag, err := drv.Lag(c.ctx, c.stream, c.group, nil)
					if err != nil {
						return err
					}
					lag.Partitions = nonNil(lag.Partitions)
					out := struct {
						Stream string   `json:"stream"`
						Group  string   `json:"group"`
						Lag    rheo.Lag `json:"lag"`
					}{c.stream, c.group, lag}
					return c.emit(out, func(w io.Writer) error {
						fmt.Fprintf(w, "reset group %q on stream %q; its lag is now:\n", c.group, c.stream)
						return lagTable(lag).write(w)
					})
				})
			}
		},
	}
}
