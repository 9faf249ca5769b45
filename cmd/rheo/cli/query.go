package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

func queryCommand() *command {
	return &command{
		name: "query",
		synopsis: "STREAM [--type T] [--key K] [--payload JSON] [--metadata JSON] [--correlation-id ID] " +
			"[--from TIME] [--to TIME] [--partition P] [--after-sequence N] [--until-sequence N] [--limit N] [--after CURSOR] [--desc]",
		summary: "search a stream's history by type, key, payload, lineage, time or sequence",
		args:    []string{"STREAM"},
		details: `The filters combine with AND. --payload and --metadata match events whose
payload or metadata contains the given JSON object (as PostgreSQL's @>
decides); --correlation-id ID is --metadata '{"correlation_id": ID}'.
TIME is RFC 3339, such as 2026-01-02T15:04:05Z.

Events come oldest first, in (sequence, partition) order, or newest first
with --desc. A full page ends with the command for the next one (on stderr,
in table output); under --output json the page's "cursor" is what --after
takes. Paging never skips or repeats an event, even while events arrive.`,
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
			fs.Int64Var(&q.AfterSequence, "after-sequence", 0, "events with a sequence above `N`")
			fs.Var(&untilSequence, "until-sequence", "events with a sequence at most `N`")
			fs.IntVar(&q.MaxCount, "limit", 100, "at most `N` events")
			fs.StringVar(&q.After, "after", "", "continue after the page that returned this `CURSOR`")
			fs.BoolVar(&q.Descending, "desc", false, "newest first")
			return func(c *call) error {
				c.stream = c.args[0]
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
					return c.query(drv, q)
				})
			}
		},
	}
}

func (c *call) query(drv driver.Driver, q rheo.Query) error {
	page, err := drv.Query(c.ctx, c.stream, q)
	if err != nil {
		return err
	}
	page.Events = nonNil(page.Events)
	err = c.emit(page, func(w io.Writer) error {
		t := newTable("TS", "PARTITION", "SEQUENCE", "ID", "TYPE", "KEY", "CORRELATION_ID", "PAYLOAD")
		for _, ev := range page.Events {
			// A correlation_id that is not a string shows as none.
			lineage, _ := rheo.LineageOf(ev.Metadata)
			t.add(ev.TS, ev.Partition, ev.Sequence, ev.ID, ev.Type, ev.Key, lineage.CorrelationID, ev.Payload)
		}
		return t.write(w)
	})
	if err == nil && !c.json && len(page.Events) == q.MaxCount {
		fmt.Fprintf(c.stderr, "next page: the same command with --after %s\n", page.Cursor)
	}
	return err
}
