package cli

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/textsafe"
)

// tailPage is how many events one Read of tail asks for.
const tailPage = 500

// tailPoll is how often tail --follow reads every partition, whatever the
// wakeups: they are hints, and SQLite sees no appends of other processes.
const tailPoll = time.Second

func tailCommand() *command {
	return &command{
		name:     "tail",
		synopsis: "STREAM [-n N] [--follow] [--partition P]...",
		summary:  "show a stream's latest events, and with --follow the new ones as they are appended",
		args:     []string{"STREAM"},
		details: `Prints the last N events of the stream (of each partition given, merged by
time), one per line. --follow then prints new events as they commit, woken
by the database's notifications (LISTEN/NOTIFY on PostgreSQL) and reading
every partition at least once a second; stop it with Ctrl-C. With
--output json each event is one JSON object on its own line.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			n := intFlagOf(fs, "n", 10, "show the last `N` events first")
			follow := fs.Bool("follow", false, "keep printing new events until interrupted")
			var partitions intList
			fs.Var(&partitions, "partition", "only partition `P` (repeat, or separate with commas)")
			return func(c *call) error {
				c.stream = c.args[0]
				if *n < 0 {
					return usagef("-n must not be negative, got %d", *n)
				}
				return c.withDriver(func(drv driver.Driver) error {
					return c.tail(drv, *n, *follow, partitions.sorted())
				})
			}
		},
	}
}

func (c *call) tail(drv driver.Driver, n int, follow bool, partitions []int) error {
	if partitions == nil {
		count, err := c.partitionCount(drv)
		if err != nil {
			return err
		}
		for p := range count {
			partitions = append(partitions, p)
		}
	}
	// Subscribe first, so that nothing appended while the latest events
	// are read goes unnoticed.
	wakeups, unsubscribe := drv.Wakeups(c.stream)
	defer unsubscribe()

	// positions holds the last sequence printed, or skipped, per partition:
	// later commits get higher sequences, so reading after it misses none.
	positions := make(map[int]int64, len(partitions))
	var latest []rheo.Event
	for _, p := range partitions {
		// One event at least, to learn the partition's position.
		page, err := drv.Query(c.ctx, c.stream, rheo.Query{Partition: &p, Descending: true, MaxCount: max(n, 1)})
		if err != nil {
			return err
		}
		if len(page.Events) > 0 {
			positions[p] = page.Events[0].Sequence
		}
		latest = append(latest, page.Events[:min(n, len(page.Events))]...)
	}
	slices.SortFunc(latest, func(a, b rheo.Event) int {
		return cmp.Or(a.TS.Compare(b.TS), a.Partition-b.Partition, cmp.Compare(a.Sequence, b.Sequence))
	})
	if err := c.printEvents(latest[max(0, len(latest)-n):]); err != nil {
		return err
	}
	if !follow {
		return nil
	}

	poll := time.NewTicker(tailPoll)
	defer poll.Stop()
	for {
		due := partitions
		select {
		case <-c.ctx.Done():
			return nil
		case w, ok := <-wakeups:
			if !ok {
				return failf("the database closed the subscription to stream %q", c.stream)
			}
			if !slices.Contains(partitions, w.Partition) {
				continue
			}
			due = []int{w.Partition}
		case <-poll.C:
		}
		for _, p := range due {
			if err := c.readNew(drv, p, positions); err != nil {
				return err
			}
		}
	}
}

// readNew prints the events of partition p after positions[p] and
// advances it.
func (c *call) readNew(ops driver.Ops, p int, positions map[int]int64) error {
	for {
		evs, err := ops.Read(c.ctx, c.stream, &rheo.ReadOptions{After: positions[p], MaxCount: tailPage, Partition: p})
		if err != nil {
			if c.ctx.Err() != nil {
				return nil
			}
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		if err := c.printEvents(evs); err != nil {
			return err
		}
		positions[p] = evs[len(evs)-1].Sequence
	}
}

// printEvents prints events one per line: JSON objects under --output
// json, else the time, position, id, type, key and payload.
func (c *call) printEvents(evs []rheo.Event) error {
	for _, ev := range evs {
		if err := c.printEvent(c.stdout, ev); err != nil {
			return err
		}
	}
	return nil
}

func (c *call) printEvent(w io.Writer, ev rheo.Event) error {
	if c.json {
		return writeJSONLine(w, ev)
	}
	_, err := fmt.Fprintf(w, "%s  %d/%d  %s  %s  %s  %s\n", formatCell(ev.TS), ev.Partition, ev.Sequence,
		formatCell(ev.ID), formatCell(ev.Type), formatCell(ev.Key), textsafe.Visible(compactJSON(ev.Payload, 1<<20)))
	return err
}
