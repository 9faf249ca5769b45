package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// appendBatchSize is how many stdin lines go into one AppendBatch call.
const appendBatchSize = 500

// maxLine is the longest stdin line append accepts.
const maxLine = 16 << 20

func appendCommand() *command {
	return &command{
		name:     "append",
		synopsis: "STREAM [JSON] [--key K] [--id ID] [--partition P] [--metadata JSON]",
		summary:  "append one event, or a batch of JSON lines read from stdin",
		args:     []string{"STREAM", "..."},
		details: `JSON is the event's payload, a JSON object. Without it (or with "-") each
non-empty line of stdin is one payload; lines are appended in batches of
500, each batch atomically. The routing key is --key, else the payload's
"key" field; events without a key go to partition 0. --id makes the append
idempotent: repeating it with the same content returns the stored event.
--metadata is a JSON object stored with every event, for lineage such as
{"correlation_id": "order-42"}.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			key := fs.String("key", "", "routing `key`; defaults to the payload's \"key\" field")
			id := fs.String("id", "", "event `ID` for an idempotent append (single event only)")
			var partition optionalInt64
			fs.Var(&partition, "partition", "put the event(s) in partition `P` instead of routing by key")
			metadata := fs.String("metadata", "", "`JSON` object stored with the event(s)")
			return func(c *call) error {
				c.stream = c.args[0]
				if len(c.args) > 2 {
					return usagef("unexpected argument %q; give the payload as one argument (quote it)", c.args[2])
				}
				var meta json.RawMessage
				if *metadata != "" {
					if !json.Valid([]byte(*metadata)) {
						return usagef("--metadata is not valid JSON: %s", *metadata)
					}
					meta = json.RawMessage(*metadata)
				}
				var part *int
				if partition.value != nil {
					p := int(*partition.value)
					part = &p
				}
				if len(c.args) == 2 && c.args[1] != "-" {
					payload := c.args[1]
					if !json.Valid([]byte(payload)) {
						return usagef("the payload is not valid JSON: %s", payload)
					}
					return c.withDriver(func(drv driver.Driver) error {
						return c.appendOne(drv, json.RawMessage(payload), &rheo.AppendOptions{Key: *key, ID: *id, Partition: part, Metadata: meta})
					})
				}
				if *id != "" {
					return usagef("--id applies to a single event, not to lines read from stdin")
				}
				return c.withDriver(func(drv driver.Driver) error {
					return c.appendLines(drv, *key, &rheo.AppendBatchOptions{Partition: part, Metadata: meta})
				})
			}
		},
	}
}

func (c *call) appendOne(drv driver.Driver, payload json.RawMessage, opts *rheo.AppendOptions) error {
	ev, err := drv.Append(c.ctx, c.stream, payload, opts)
	if err != nil {
		return err
	}
	return c.emit(ev, func(w io.Writer) error {
		t := newTable("STREAM", "PARTITION", "SEQUENCE", "ID", "KEY", "TS")
		t.add(ev.Stream, ev.Partition, ev.Sequence, ev.ID, ev.Key, ev.TS)
		return t.write(w)
	})
}

// appendSummary is what a batch append wrote to one partition.
type appendSummary struct {
	Partition     int   `json:"partition"`
	Events        int64 `json:"events"`
	FirstSequence int64 `json:"first_sequence"`
	LastSequence  int64 `json:"last_sequence"`
}

// appendLines appends stdin's lines in batches and prints a summary per
// partition.
func (c *call) appendLines(drv driver.Driver, key string, opts *rheo.AppendBatchOptions) error {
	if isTerminal(c.stdin) {
		fmt.Fprintln(c.stderr, "reading one JSON object per line; end with Ctrl-D")
	}
	sc := bufio.NewScanner(c.stdin)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	summaries := map[int]*appendSummary{}
	var appended int64
	prog := c.newProgress()
	defer prog.done()

	var batch []rheo.BatchItem
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		events, err := drv.AppendBatch(c.ctx, c.stream, batch, opts)
		if err != nil {
			if appended > 0 {
				fmt.Fprintf(c.stderr, "rheo: %d events were appended before this failure\n", appended)
			}
			return err
		}
		for _, ev := range events {
			s := summaries[ev.Partition]
			if s == nil {
				s = &appendSummary{Partition: ev.Partition, FirstSequence: ev.Sequence}
				summaries[ev.Partition] = s
			}
			s.Events++
			s.FirstSequence = min(s.FirstSequence, ev.Sequence)
			s.LastSequence = max(s.LastSequence, ev.Sequence)
		}
		appended += int64(len(events))
		batch = batch[:0]
		prog.show("append: %d events", appended)
		return nil
	}

	for line := 1; sc.Scan(); line++ {
		text := sc.Bytes()
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		if !json.Valid(text) {
			return failf("stdin line %d is not valid JSON; %d events were appended before it", line, appended)
		}
		batch = append(batch, rheo.BatchItem{Payload: json.RawMessage(append([]byte(nil), text...)), Key: key})
		if len(batch) == appendBatchSize {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return failf("read stdin: %v; %d events were appended before it", err, appended)
	}
	if err := flush(); err != nil {
		return err
	}
	prog.done()

	var parts []appendSummary
	for p := range summaries {
		parts = append(parts, *summaries[p])
	}
	slices.SortFunc(parts, func(a, b appendSummary) int { return a.Partition - b.Partition })
	out := struct {
		Stream     string          `json:"stream"`
		Appended   int64           `json:"appended"`
		Partitions []appendSummary `json:"partitions"`
	}{c.stream, appended, nonNil(parts)}
	return c.emit(out, func(w io.Writer) error {
		t := newTable("PARTITION", "EVENTS", "FIRST_SEQUENCE", "LAST_SEQUENCE")
		for _, s := range parts {
			t.add(s.Partition, s.Events, s.FirstSequence, s.LastSequence)
		}
		t.add("total", appended, blank{}, blank{})
		return t.write(w)
	})
}
