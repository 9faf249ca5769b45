package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
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
			n := fs.Int("n", 10, "show the last `N` events first")
			follow := fs.Bool("follow", false, "keep printing new events until interrupted")
			var partitions intList
			fs.Var(&partitions, "partition", "only this `partition` (repeat, or separate with commas)")
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
	count, err := c.partitionCount(drv)
	if err != nil {
		return err
	}
	if partitions == nil {
		for p := range count {
			partitions = append(partitions, p)
		}
	}
	for _, p := range partitions {
		if p < 0 || p >= count {
			return rheo.Errorf(rheo.ErrInvalidPartition, "partition %d is outside 0..%d", p, count-1)
		}
	}
	// Subscribe first, so that nothing appended while the backlog is read
	// goes unnoticed.
	wakeups, unsubscribe := drv.Wakeups(c.stream)
	defer unsubscribe()

	positions := make(map[int]int64, len(partitions))
	var latest []rheo.Event
	for _, p := range partitions {
		hwm, err := c.highWatermark(drv, p)
		if err != nil {
			return err
		}
		positions[p] = hwm
		evs, err := drv.Read(c.ctx, c.stream, &rheo.ReadOptions{After: max(0, hwm-int64(n)), MaxCount: n, Partition: p})
		if err != nil {
			return err
		}
		latest = append(latest, evs...)
	}
	slices.SortStableFunc(latest, func(a, b rheo.Event) int { return a.TS.Compare(b.TS) })
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
			if _, watched := positions[w.Partition]; !watched {
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

// highWatermark finds the last sequence of partition p with O(log n)
// reads: sequences are contiguous from 1, so an event follows sequence s
// exactly when s is below the high watermark.
func (c *call) highWatermark(ops driver.Ops, p int) (int64, error) {
	below := func(s int64) (bool, error) {
		evs, err := ops.Read(c.ctx, c.stream, &rheo.ReadOptions{After: s, MaxCount: 1, Partition: p})
		return len(evs) > 0, err
	}
	// The high watermark is in lo..hi once below(hi) is false.
	lo, hi := int64(0), int64(1)
	for {
		more, err := below(hi)
		if err != nil {
			return 0, err
		}
		if !more {
			break
		}
		lo, hi = hi+1, 2*hi
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		more, err := below(mid - 1)
		if err != nil {
			return 0, err
		}
		if more {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
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
		ev.ID, formatCell(ev.Type), formatCell(ev.Key), compactJSON(ev.Payload, 1<<20))
	return err
}
