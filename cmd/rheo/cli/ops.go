package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/textsafe"
)

// withDriver opens the database, runs fn, and closes the database.
func (c *call) withDriver(fn func(drv driver.Driver) error) error {
	drv, err := c.open()
	if err != nil {
		return err
	}
	defer drv.Close()
	return fn(drv)
}

// nonNil returns s, or an empty slice for nil, so that JSON prints [].
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func streamsCommand() *command {
	return &command{
		name:    "streams",
		summary: "list the streams with their partition counts",
		define: func(fs *flag.FlagSet) func(c *call) error {
			return func(c *call) error {
				return c.withDriver(func(drv driver.Driver) error {
					streams, err := drv.ListStreams(c.ctx)
					if err != nil {
						return err
					}
					return c.emit(nonNil(streams), func(w io.Writer) error {
						// On a Citus cluster, the node that holds each.
						if slices.ContainsFunc(streams, func(s rheo.StreamSummary) bool { return s.Node != "" }) {
							t := newTable("STREAM", "PARTITIONS", "CREATED_AT", "NODE")
							for _, s := range streams {
								t.add(s.Name, s.PartitionCount, s.CreatedAt, s.Node)
							}
							return t.write(w)
						}
						t := newTable("STREAM", "PARTITIONS", "CREATED_AT")
						for _, s := range streams {
							t.add(s.Name, s.PartitionCount, s.CreatedAt)
						}
						return t.write(w)
					})
				})
			}
		},
	}
}

func groupsCommand() *command {
	return &command{
		name:     "groups",
		synopsis: "STREAM",
		summary:  "list the consumer groups of a stream",
		args:     []string{"STREAM"},
		define: func(fs *flag.FlagSet) func(c *call) error {
			return func(c *call) error {
				c.stream = c.args[0]
				return c.withDriver(func(drv driver.Driver) error {
					groups, err := drv.ListGroups(c.ctx, c.stream)
					if err != nil {
						return err
					}
					return c.emit(nonNil(groups), func(w io.Writer) error {
						t := newTable("GROUP", "MAX_ATTEMPTS", "ORDERING", "CREATED_AT")
						for _, g := range groups {
							t.add(g.Name, g.MaxAttempts, string(g.Ordering), g.CreatedAt)
						}
						return t.write(w)
					})
				})
			}
		},
	}
}

func lagCommand() *command {
	return &command{
		name:     "lag",
		synopsis: "STREAM GROUP [--partition P]...",
		summary:  "show a group's frontier, high watermark and lag per partition, and the total",
		args:     []string{"STREAM", "GROUP"},
		details: `The frontier is the highest sequence up to which every event is acked or
dead-lettered for the group; the lag is high watermark - frontier.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			var partitions intList
			fs.Var(&partitions, "partition", "only partition `P` (repeat, or separate with commas)")
			return func(c *call) error {
				c.stream, c.group = c.args[0], c.args[1]
				return c.withDriver(func(drv driver.Driver) error {
					lag, err := drv.Lag(c.ctx, c.stream, c.group, partitions.sorted())
					if err != nil {
						return err
					}
					lag.Partitions = nonNil(lag.Partitions)
					return c.emit(lag, func(w io.Writer) error { return lagTable(lag).write(w) })
				})
			}
		},
	}
}

// lagTable is a group's lag per partition with a total row.
func lagTable(lag rheo.Lag) *table {
	t := newTable("PARTITION", "FRONTIER", "HIGH_WATERMARK", "LAG")
	for _, p := range lag.Partitions {
		t.add(p.Partition, p.Frontier, p.HighWatermark, p.Lag)
	}
	t.add("total", blank{}, blank{}, lag.Total)
	return t
}

func infoCommand() *command {
	return &command{
		name:     "info",
		synopsis: "STREAM GROUP",
		summary:  "summarise a group: lag, leases in flight, pending retries, dead letters, oldest unsettled event",
		args:     []string{"STREAM", "GROUP"},
		details: `INFLIGHT counts leases that have not expired. PENDING_RETRY counts events
waiting for a retry delay, whose lease expired, or reopened by a replay.
OLDEST_UNSETTLED is the ts of the oldest event the group has not acked or
dead-lettered, including events it was not offered yet. In a group ordered
by key, events waiting behind an earlier event of their key count in LAG
only.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			return func(c *call) error {
				c.stream, c.group = c.args[0], c.args[1]
				return c.withDriver(func(drv driver.Driver) error {
					info, err := drv.GroupInfo(c.ctx, c.stream, c.group)
					if err != nil {
						return err
					}
					out := struct {
						Stream string `json:"stream"`
						Group  string `json:"group"`
						rheo.GroupInfo
					}{c.stream, c.group, info}
					return c.emit(out, func(w io.Writer) error {
						t := newTable("STREAM", "GROUP", "LAG", "INFLIGHT", "PENDING_RETRY", "DEAD_LETTERS", "OLDEST_UNSETTLED")
						t.add(c.stream, c.group, info.Lag, info.InFlight, info.PendingRetry, info.DeadLetters, info.OldestUnsettledTS)
						return t.write(w)
					})
				})
			}
		},
	}
}

func deadLettersCommand() *command {
	return &command{
		name:     "dead-letters",
		synopsis: "STREAM GROUP [--limit N] [--after EVENT_ID]",
		summary:  "list a group's dead letters with their payloads, in (partition, sequence) order",
		args:     []string{"STREAM", "GROUP"},
		details: `A full page ends with the command that shows the next one (on stderr, in
table output). Reopen dead letters with: rheo replay STREAM GROUP --event-id ID`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			limit := intFlagOf(fs, "limit", 100, "show at most `N` dead letters")
			after := fs.String("after", "", "start after the dead letter with this `EVENT_ID` (the last of the previous page)")
			return func(c *call) error {
				c.stream, c.group = c.args[0], c.args[1]
				if *limit < 1 {
					return usagef("--limit must be at least 1, got %d", *limit)
				}
				return c.withDriver(func(drv driver.Driver) error {
					dls, err := drv.DeadLetters(c.ctx, c.stream, c.group, &rheo.DeadLetterOptions{MaxCount: *limit, After: *after})
					if errors.Is(err, rheo.ErrCursorNotFound) {
						return failf("--after %q is not a dead letter of group %q; leave --after out to start from the first", *after, c.group)
					}
					if err != nil {
						return err
					}
					err = c.emit(nonNil(dls), func(w io.Writer) error {
						t := newTable("EVENT_ID", "PARTITION", "SEQUENCE", "ATTEMPT", "REASON", "DEAD_LETTERED_AT", "TYPE", "KEY", "PAYLOAD")
						for _, d := range dls {
							t.add(d.Event.ID, d.Event.Partition, d.Event.Sequence, d.Attempt, d.Reason, d.DeadLetteredAt,
								d.Event.Type, d.Event.Key, d.Event.Payload)
						}
						return t.write(w)
					})
					if err == nil && !c.json && len(dls) == *limit {
						fmt.Fprintf(c.stderr, "next page: rheo dead-letters %s %s --limit %d --after %s\n",
							textsafe.Visible(shellQuote(c.stream)), textsafe.Visible(shellQuote(c.group)), *limit,
							textsafe.Visible(shellQuote(dls[len(dls)-1].Event.ID)))
					}
					return err
				})
			}
		},
	}
}

func createStreamCommand() *command {
	return &command{
		name:     "create-stream",
		synopsis: "STREAM [--partitions N]",
		summary:  "create a stream",
		args:     []string{"STREAM"},
		details: `Events are routed to partitions by key; order holds within a partition,
and partitions are consumed in parallel. The count cannot change later.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			partitions := intFlagOf(fs, "partitions", 1, "number of `N` partitions")
			return func(c *call) error {
				c.stream = c.args[0]
				return c.withDriver(func(drv driver.Driver) error {
					err := drv.CreateStream(c.ctx, c.stream, *partitions)
					if errors.Is(err, rheo.ErrAlreadyExists) {
						return failf("stream %q already exists; list streams with: rheo streams", c.stream)
					}
					if err != nil {
						return err
					}
					out := struct {
						Stream         string `json:"stream"`
						PartitionCount int    `json:"partition_count"`
					}{c.stream, *partitions}
					return c.emit(out, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "created stream %q with %d partition(s)\n", c.stream, *partitions)
						return err
					})
				})
			}
		},
	}
}

func createGroupCommand() *command {
	return &command{
		name:     "create-group",
		synopsis: "STREAM GROUP [--max-attempts N] [--ordering MODE] [--start-after N | --start-at TIME] [--partition P]...",
		summary:  "create a consumer group on a stream",
		args:     []string{"STREAM", "GROUP"},
		details: `A new group starts at the beginning of every partition, unless --start-after
or --start-at places it later (in the partitions given by --partition, or
all). TIME is RFC 3339, such as 2026-01-02T15:04:05Z.

` + orderingModes,
		define: func(fs *flag.FlagSet) func(c *call) error {
			maxAttempts := intFlagOf(fs, "max-attempts", 5, "leases an event gets before it is dead-lettered")
			ordering := fs.String("ordering", string(rheo.OrderingNone), "hand out events in `MODE` order: none, key or partition")
			var startAfter optionalInt64
			var startAt optionalTime
			var partitions intList
			fs.Var(&startAfter, "start-after", "skip the events up to `SEQUENCE`")
			fs.Var(&startAt, "start-at", "start at the first event with ts >= `TIME`")
			fs.Var(&partitions, "partition", "apply --start-after or --start-at to partition `P` only (repeat, or separate with commas)")
			return func(c *call) error {
				c.stream, c.group = c.args[0], c.args[1]
				if *maxAttempts < 1 {
					return usagef("--max-attempts must be at least 1, got %d", *maxAttempts)
				}
				if startAfter.value != nil && startAt.value != nil {
					return usagef("--start-after and --start-at are exclusive")
				}
				return c.withDriver(func(drv driver.Driver) error {
					err := drv.CreateGroup(c.ctx, c.stream, c.group, &rheo.CreateGroupOptions{
						MaxAttempts: *maxAttempts,
						StartAfter:  startAfter.value,
						StartAt:     startAt.value,
						Partitions:  partitions.sorted(),
						Ordering:    rheo.Ordering(*ordering),
					})
					if errors.Is(err, rheo.ErrAlreadyExists) {
						return failf("group %q already exists on stream %q; list groups with: rheo groups %s", c.group, c.stream, c.stream)
					}
					if err != nil {
						return err
					}
					out := struct {
						Stream      string        `json:"stream"`
						Group       string        `json:"group"`
						MaxAttempts int           `json:"max_attempts"`
						Ordering    rheo.Ordering `json:"ordering"`
					}{c.stream, c.group, *maxAttempts, rheo.Ordering(*ordering)}
					return c.emit(out, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "created group %q on stream %q (at most %d attempts per event, ordering %s)\n",
							c.group, c.stream, *maxAttempts, *ordering)
						return err
					})
				})
			}
		},
	}
}

// orderingModes is what create-group and set-ordering say of the modes.
const orderingModes = `MODE is how strictly the group hands out events:
  none       the default: whatever is claimable, several leases of one
             partition at once; a retried event comes back after later ones
  key        an event waits until every earlier event of its partition with
             the same key is acked or dead-lettered: each key's events one at
             a time, in order, retries included; other keys go on meanwhile,
             and events without a key are not ordered
  partition  an event waits until every earlier event of its partition is
             acked or dead-lettered: one lease per partition at a time`

func setOrderingCommand() *command {
	return &command{
		name:     "set-ordering",
		synopsis: "STREAM GROUP MODE",
		summary:  "change how strictly a group hands out the events of a key or a partition: none, key or partition",
		args:     []string{"STREAM", "GROUP", "MODE"},
		details: orderingModes + `

The change takes effect from the group's next fetch and changes nothing
else: leases already handed out are not taken back, so events of one key
leased before a change to key may still be in progress together. Events
that waited under key become claimable at once under none.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			return func(c *call) error {
				c.stream, c.group = c.args[0], c.args[1]
				ordering := rheo.Ordering(c.args[2])
				return c.withDriver(func(drv driver.Driver) error {
					if err := drv.SetOrdering(c.ctx, c.stream, c.group, ordering); err != nil {
						return err
					}
					out := struct {
						Stream   string        `json:"stream"`
						Group    string        `json:"group"`
						Ordering rheo.Ordering `json:"ordering"`
					}{c.stream, c.group, ordering}
					return c.emit(out, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "group %q of stream %q now has ordering %s (from its next fetch)\n",
							c.group, c.stream, ordering)
						return err
					})
				})
			}
		},
	}
}
