package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
)

func dropGroupCommand() *command {
	return &command{
		name:     "drop-group",
		synopsis: "STREAM GROUP --confirm",
		summary:  "remove a consumer group with its leases, pending retries, dead letters and cursors",
		args:     []string{"STREAM", "GROUP"},
		details: `The events stay in the log; only the group's bookkeeping goes. Leases the
group's consumers hold become stale, so their settles fail. A group created
again under the name starts from the beginning (the low watermark).`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			confirm := fs.Bool("confirm", false, "really drop the group")
			return func(c *call) error {
				c.stream, c.group = c.args[0], c.args[1]
				if !*confirm {
					return usagef("--confirm is required: drop-group removes the group with its leases, pending retries and dead letters; nothing was changed")
				}
				return c.withDriver(func(drv driver.Driver) error {
					if err := drv.DropGroup(c.ctx, c.stream, c.group, &rheo.DropOptions{Confirm: true}); err != nil {
						return err
					}
					out := struct {
						Stream  string `json:"stream"`
						Group   string `json:"group"`
						Dropped bool   `json:"dropped"`
					}{c.stream, c.group, true}
					return c.emit(out, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "dropped group %q of stream %q\n", c.group, c.stream)
						return err
					})
				})
			}
		},
	}
}

func dropStreamCommand() *command {
	return &command{
		name:     "drop-stream",
		synopsis: "STREAM --confirm",
		summary:  "delete a stream with every event and group, and print how many events went",
		args:     []string{"STREAM"},
		details: `The stream, its groups and all its events are deleted in one transaction;
the name can then be created anew, with sequences from 1. A long stream is
a long transaction: prune it first (rheo prune STREAM --force) to keep the
drop short.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			confirm := fs.Bool("confirm", false, "really delete the stream and its events")
			return func(c *call) error {
				c.stream = c.args[0]
				if !*confirm {
					return usagef("--confirm is required: drop-stream deletes the stream with every event and group; nothing was changed")
				}
				return c.withDriver(func(drv driver.Driver) error {
					n, err := drv.DropStream(c.ctx, c.stream, &rheo.DropOptions{Confirm: true})
					if err != nil {
						return err
					}
					out := struct {
						Stream        string `json:"stream"`
						EventsDeleted int64  `json:"events_deleted"`
					}{c.stream, n}
					return c.emit(out, func(w io.Writer) error {
						_, err := fmt.Fprintf(w, "dropped stream %q: %d event(s) deleted\n", c.stream, n)
						return err
					})
				})
			}
		},
	}
}

// maxAgeFlag is the --max-age of retention: a duration, or forever.
type maxAgeFlag struct {
	given bool
	value time.Duration // 0: forever
}

func (f *maxAgeFlag) String() string {
	if !f.given {
		return ""
	}
	return formatAge(f.value)
}

func (f *maxAgeFlag) Set(s string) error {
	d, err := parseAge(s)
	if err != nil {
		return err
	}
	f.given, f.value = true, d
	return nil
}

// ageUnits are the units --max-age takes beyond time.ParseDuration's.
var ageUnits = map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour}

var ageComponent = regexp.MustCompile(`([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h|d|w)`)

// parseAge parses a retention: "forever" (0), or a sequence of decimal
// numbers with units, as time.ParseDuration takes them plus d (24h) and
// w (7d), such as 30d, 2w, 36h or 1d12h. It must be positive.
func parseAge(s string) (time.Duration, error) {
	if s == "forever" {
		return 0, nil
	}
	if s == "0" { // which time.ParseDuration takes without a unit
		return 0, fmt.Errorf("a retention must be positive, got %q; --max-age forever keeps events forever", s)
	}
	rest := s
	var total time.Duration
	for rest != "" {
		m := ageComponent.FindStringSubmatchIndex(rest)
		if m == nil || m[0] != 0 {
			return 0, fmt.Errorf("not a duration such as 30d, 2w or 36h, nor forever: %q", s)
		}
		number, unit := rest[m[2]:m[3]], rest[m[4]:m[5]]
		rest = rest[m[1]:]
		var d time.Duration
		if scale, ok := ageUnits[unit]; ok {
			n, err := strconv.ParseFloat(number, 64)
			if err != nil || n*float64(scale) >= math.MaxInt64 {
				return 0, fmt.Errorf("%q is longer than the longest retention, about 292 years", s)
			}
			d = time.Duration(n * float64(scale))
		} else {
			var err error
			if d, err = time.ParseDuration(number + unit); err != nil {
				return 0, fmt.Errorf("%q is longer than the longest retention, about 292 years", s)
			}
		}
		if total > math.MaxInt64-d {
			return 0, fmt.Errorf("%q is longer than the longest retention, about 292 years", s)
		}
		total += d
	}
	if total <= 0 {
		return 0, fmt.Errorf("a retention must be positive, got %q; --max-age forever keeps events forever", s)
	}
	return total, nil
}

// formatAge prints a retention the way --max-age takes it: in weeks or
// days when it is a whole number of them, else as a Go duration.
func formatAge(d time.Duration) string {
	switch {
	case d == 0:
		return "forever"
	case d%ageUnits["w"] == 0:
		return strconv.FormatInt(int64(d/ageUnits["w"]), 10) + "w"
	case d%ageUnits["d"] == 0:
		return strconv.FormatInt(int64(d/ageUnits["d"]), 10) + "d"
	}
	return d.String()
}

// rangeRow is one partition of a stream's retained log.
type rangeRow struct {
	Partition     int   `json:"partition"`
	LowWatermark  int64 `json:"low_watermark"`
	HighWatermark int64 `json:"high_watermark"`
	// Retained counts the events kept: the range is contiguous.
	Retained int64 `json:"retained"`
}

func rangeRows(r rheo.StreamInfo) []rangeRow {
	rows := make([]rangeRow, len(r.Partitions))
	for i, p := range r.Partitions {
		rows[i] = rangeRow{p.Partition, p.LowWatermark, p.HighWatermark, p.HighWatermark - p.LowWatermark + 1}
	}
	return rows
}

func retentionCommand() *command {
	return &command{
		name:     "retention",
		synopsis: "STREAM [--max-age AGE | --max-age forever]",
		summary:  "show or set how long a stream keeps its events, with each partition's low and high watermarks",
		args:     []string{"STREAM"},
		details: `AGE is a duration in Go's syntax plus the units d (24h) and w (7d): 30d,
2w, 36h, 1d12h. --max-age forever removes the retention: events are kept
forever, the default. Without --max-age the command only shows the stream.

A retention does not delete anything by itself: rheo prune STREAM, the
retention.Pruner of an application, or a pg_cron job (docs/ops.md) deletes
the events older than it that every group has passed. The low watermark is
the lowest sequence retained; the events from it up to the high watermark
are all kept.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			var maxAge maxAgeFlag
			fs.Var(&maxAge, "max-age", "keep events for `AGE` (such as 30d, 2w or 36h), or forever")
			return func(c *call) error {
				c.stream = c.args[0]
				if maxAge.given {
					c.role = roleAdmin // set_retention
				}
				return c.withDriver(func(drv driver.Driver) error {
					if maxAge.given {
						if err := drv.SetRetention(c.ctx, c.stream, maxAge.value); err != nil {
							return err
						}
					}
					r, err := drv.StreamInfo(c.ctx, c.stream)
					if err != nil {
						return err
					}
					var age *string
					if r.MaxAge != 0 {
						s := formatAge(r.MaxAge)
						age = &s
					}
					out := struct {
						Stream     string     `json:"stream"`
						MaxAge     *string    `json:"max_age"` // null: kept forever
						Partitions []rangeRow `json:"partitions"`
					}{c.stream, age, rangeRows(r)}
					return c.emit(out, func(w io.Writer) error {
						if r.MaxAge == 0 {
							fmt.Fprintf(w, "stream %q keeps its events forever\n", c.stream)
						} else {
							fmt.Fprintf(w, "stream %q keeps its events for %s (prune deletes older ones that every group has passed)\n",
								c.stream, formatAge(r.MaxAge))
						}
						t := newTable("PARTITION", "LOW_WATERMARK", "HIGH_WATERMARK", "RETAINED")
						for _, row := range out.Partitions {
							t.add(row.Partition, row.LowWatermark, row.HighWatermark, row.Retained)
						}
						return t.write(w)
					})
				})
			}
		},
	}
}

// errDryRun rolls back the transaction of a dry run.
var errDryRun = errors.New("dry run")

func pruneCommand() *command {
	return &command{
		name:     "prune",
		synopsis: "STREAM [--force] [--dry-run] [--max-count N]",
		summary:  "delete a stream's events older than its retention that every group has passed",
		args:     []string{"STREAM"},
		details: `Prune deletes, in each partition from its oldest event, the events older
than the stream's retention (set it with rheo retention STREAM --max-age
AGE) that every group has acked or dead-lettered; the first event that
does not qualify stops the partition. It runs in transactions of at most
--max-count events each until nothing is left, and prints how many events
each partition lost and its watermarks afterwards.

--force also deletes aged events that some group has not settled: that
group's leases on them become stale, its retries and dead letters of them
go, and its cursor moves past them.

--dry-run runs the same prunes in one transaction and rolls it back, so
the counts are exact and nothing changes. Meanwhile, as during a prune,
fetches of the stream's groups skip the partitions and appends to them
wait: dry-run a long prune at a quiet time.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			force := fs.Bool("force", false, "also delete aged events that groups have not settled")
			dryRun := fs.Bool("dry-run", false, "count what would be deleted, changing nothing")
			maxCount := intFlagOf(fs, "max-count", driverutil.DefaultPruneCount, "delete at most `N` events per transaction")
			return func(c *call) error {
				c.stream = c.args[0]
				if *maxCount < 1 {
					return usagef("--max-count must be at least 1, got %d", *maxCount)
				}
				return c.withDriver(func(drv driver.Driver) error {
					res, err := c.prune(drv, &rheo.PruneOptions{MaxCount: *maxCount, Force: *force}, *dryRun)
					if err != nil {
						return err
					}
					return c.emit(res, func(w io.Writer) error {
						header := "PRUNED"
						if *dryRun {
							header = "WOULD_PRUNE"
						}
						t := newTable("PARTITION", header, "LOW_WATERMARK", "HIGH_WATERMARK")
						for _, p := range res.Partitions {
							t.add(p.Partition, p.Events, p.LowWatermark, p.HighWatermark)
						}
						t.add("total", res.Total, blank{}, blank{})
						if err := t.write(w); err != nil {
							return err
						}
						if *dryRun {
							_, err := fmt.Fprintln(w, "dry run: nothing was changed")
							return err
						}
						_, err := fmt.Fprintf(w, "pruned %d event(s) of stream %q in %d transaction(s)\n", res.Total, c.stream, res.Batches)
						return err
					})
				})
			}
		},
	}
}

// pruneResult is what rheo prune did, or would do, per partition.
type pruneResult struct {
	Stream string `json:"stream"`
	DryRun bool   `json:"dry_run"`
	Force  bool   `json:"force"`
	// Batches counts the Prune calls, each a transaction of its own
	// (all in one under --dry-run).
	Batches    int           `json:"batches"`
	Partitions []prunedRange `json:"partitions"`
	Total      int64         `json:"total"`
}

// prunedRange is one partition's count and its watermarks afterwards.
type prunedRange struct {
	Partition     int   `json:"partition"`
	Events        int64 `json:"events"`
	LowWatermark  int64 `json:"low_watermark"`
	HighWatermark int64 `json:"high_watermark"`
}

// prune calls Prune until it deletes nothing, and counts what each
// partition lost from the low watermarks before and after. A dry run does
// it all in one transaction that it rolls back.
func (c *call) prune(drv driver.Driver, opts *rheo.PruneOptions, dryRun bool) (pruneResult, error) {
	res := pruneResult{Stream: c.stream, DryRun: dryRun, Force: opts.Force}
	prog := c.newProgress()
	defer prog.done()
	run := func(ctx context.Context, ops driver.Ops) error {
		before, err := ops.StreamInfo(ctx, c.stream)
		if err != nil {
			return err
		}
		if before.MaxAge == 0 {
			return failf("stream %q has no retention, so nothing is pruned; set one with: rheo retention %s --max-age 30d", c.stream, c.stream)
		}
		res.Batches, res.Total = 0, 0
		for {
			n, err := ops.Prune(ctx, c.stream, opts)
			if err != nil {
				return err
			}
			res.Batches++
			res.Total += n
			prog.show("prune: %d events deleted in %d transaction(s)", res.Total, res.Batches)
			if n == 0 {
				break
			}
		}
		after, err := ops.StreamInfo(ctx, c.stream)
		if err != nil {
			return err
		}
		res.Partitions = make([]prunedRange, len(after.Partitions))
		for i, p := range after.Partitions {
			res.Partitions[i] = prunedRange{
				Partition:     p.Partition,
				Events:        p.LowWatermark - before.Partitions[i].LowWatermark,
				LowWatermark:  p.LowWatermark,
				HighWatermark: p.HighWatermark,
			}
		}
		return nil
	}
	if !dryRun {
		return res, run(c.ctx, drv)
	}
	tr, ok := drv.(driver.Transactor)
	if !ok {
		return res, failf("the %s driver cannot run a prune in a transaction (it is no driver.Transactor), so it cannot dry-run one; "+
			"rheo retention %s shows what the stream retains", c.databaseName(), c.stream)
	}
	err := tr.InTx(c.ctx, func(ctx context.Context, tx driver.Tx) error {
		if err := run(ctx, tx); err != nil {
			return err
		}
		return errDryRun
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return res, err
	}
	return res, nil
}
