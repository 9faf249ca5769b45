package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

func queryCommand() *command {
	return &command{
		name: "query",
		synopsis: "STREAM [--type T] [--key K] [--payload JSON] [--metadata JSON] [--correlation-id ID] " +
			"[--from TIME] [--to TIME] [--partition P] [--after-sequence N] [--until-sequence N] [--limit N] [--after CURSOR] " +
			"[--desc] [--order time|sequence]",
		summary: "search a stream's history by type, key, payload, lineage, time or sequence",
		args:    []string{"STREAM"},
		details: `The filters combine with AND. --payload and --metadata match events whose
payload or metadata contains the given JSON object (as PostgreSQL's @>
decides); --correlation-id ID is --metadata '{"correlation_id": ID}'.
TIME is RFC 3339, such as 2026-01-02T15:04:05Z.

Events come oldest first, or newest first with --desc, in one of two
orders:

  --order time (the default): by ts, then partition, then sequence. Each
  partition is read in sequence order, a page at a time, and the
  partitions are merged by ts: the next event shown is the oldest (with
  --desc the newest) of the partitions' next events. When every
  partition's ts grow with its sequences, as the database's clock gives
  them, that is exactly the order of ts. An event appended with an
  explicit ts older than an earlier event of its partition keeps its
  place in the partition's sequence order: it comes after that earlier
  event, not where its ts alone would put it.

  --order sequence: by (sequence, partition), the order of the database's
  query: the first event of every partition, then the second of every
  partition, and so on. It is not a time order across partitions.

A full page ends with the command for the next one (on stderr, in table
output); under --output json the page's "cursor" is what --after takes,
with the same --order and --desc. Paging never skips or repeats an event,
even while events arrive. With --desc, the pages cover the events present
when the first one was read.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			var (
				q             rheo.Query
				partition     optionalInt64
				payload       string
				metadata      string
				correlationID string
				from, to      optionalTime
				untilSequence optionalInt64
			)
			fs.StringVar(&q.Type, "type", "", "events whose payload \"type\" is `T`")
			fs.StringVar(&q.Key, "key", "", "events routed by key `K`")
			fs.StringVar(&payload, "payload", "", "events whose payload contains this `JSON` object")
			fs.StringVar(&metadata, "metadata", "", "events whose metadata contains this `JSON` object")
			fs.StringVar(&correlationID, "correlation-id", "", "events whose metadata correlation_id is `ID`")
			fs.Var(&from, "from", "events with ts at or after `TIME`")
			fs.Var(&to, "to", "events with ts at or before `TIME`")
			fs.Var(&partition, "partition", "only partition `P`")
			intVar(fs, &q.AfterSequence, "after-sequence", 0, "events with a sequence above `N`")
			fs.Var(&untilSequence, "until-sequence", "events with a sequence at most `N`")
			intVar(fs, &q.MaxCount, "limit", 100, "at most `N` events")
			fs.StringVar(&q.After, "after", "", "continue after the page that returned this `CURSOR`")
			fs.BoolVar(&q.Descending, "desc", false, "newest first")
			order := fs.String("order", "time", "`order` of the events: time (by ts, the default) or sequence (by sequence, then partition)")
			return func(c *call) error {
				c.stream = c.args[0]
				if *order != "time" && *order != "sequence" {
					return usagef("--order must be time or sequence, got %q", *order)
				}
				if q.MaxCount < 1 {
					return usagef("--limit must be at least 1, got %d", q.MaxCount)
				}
				if metadata != "" && correlationID != "" {
					return usagef("--metadata and --correlation-id are exclusive; put correlation_id in --metadata")
				}
				for _, doc := range []struct {
					flag, value string
					dst         *json.RawMessage
				}{{"--payload", payload, &q.Payload}, {"--metadata", metadata, &q.Metadata}} {
					if doc.value == "" {
						continue
					}
					if !json.Valid([]byte(doc.value)) {
						return usagef("%s is not valid JSON: %s", doc.flag, doc.value)
					}
					*doc.dst = json.RawMessage(doc.value)
				}
				if correlationID != "" {
					q.Metadata = rheo.Lineage{CorrelationID: correlationID}.Metadata()
				}
				if partition.value != nil {
					p := int(*partition.value)
					q.Partition = &p
				}
				q.From, q.To, q.UntilSequence = from.value, to.value, untilSequence.value
				return c.withDriver(func(drv driver.Driver) error {
					if *order == "sequence" {
						return c.query(drv, q)
					}
					return c.queryByTime(drv, q)
				})
			}
		},
	}
}

// query prints one page of q in the order of the database's query.
func (c *call) query(drv driver.Driver, q rheo.Query) error {
	if strings.HasPrefix(q.After, timeCursorPrefix) {
		return usagef("--after %s is a cursor of --order time; give --order time, or leave --after out", q.After)
	}
	page, err := drv.Query(c.ctx, c.stream, q)
	if err != nil {
		return err
	}
	return c.printPage(page, q.MaxCount)
}

// printPage prints a page of events, and how to get the next one when it
// is full.
func (c *call) printPage(page rheo.Page, limit int) error {
	page.Events = nonNil(page.Events)
	err := c.emit(page, func(w io.Writer) error {
		t := newTable("TS", "PARTITION", "SEQUENCE", "ID", "TYPE", "KEY", "CORRELATION_ID", "PAYLOAD")
		for _, ev := range page.Events {
			// A correlation_id that is not a string shows as none.
			lineage, _ := rheo.LineageOf(ev.Metadata)
			t.add(ev.TS, ev.Partition, ev.Sequence, ev.ID, ev.Type, ev.Key, lineage.CorrelationID, ev.Payload)
		}
		return t.write(w)
	})
	if err == nil && !c.json && len(page.Events) == limit {
		fmt.Fprintf(c.stderr, "next page: the same command with --after %s\n", page.Cursor)
	}
	return err
}
