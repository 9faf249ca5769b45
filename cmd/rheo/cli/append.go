package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
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
{"correlation_id": "order-42"}.

A stdin line must be one JSON object of at most 16 MiB. A line that is
not is refused by its number, once the lines before it are appended. On
any failure or interrupt, append says how many events are in the stream,
from which stdin lines, and the line to resume from, such as with
tail -n +LINE FILE | rheo append STREAM. When the database's answer to a
batch was lost, that batch may or may not be in the stream (it is there
whole or not at all): append names its first and last line, and the line
to resume from in either case.`,
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
	if errors.Is(err, rheo.ErrAmbiguous) {
		again := "append it again with the same --id, which stores it once"
		if opts.ID == "" {
			again = "give --id to make an append safe to repeat"
		}
		return failf("whether the event was appended is unknown: %s; look for it with: rheo tail %s; %s",
			lostAnswer(err), c.stream, again)
	}
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

// stdinLine is one line of stdin, numbered from 1, or the error that
// ended the reading at line number.
type stdinLine struct {
	number int
	text   []byte
	err    error
}

// readLines reads r line by line on a goroutine of its own, so that an
// interrupt ends append even while stdin has nothing to read. It stops
// when stop is closed.
func readLines(r io.Reader, stop <-chan struct{}) <-chan stdinLine {
	lines := make(chan stdinLine, appendBatchSize)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxLine)
		n := 0
		send := func(l stdinLine) bool {
			select {
			case lines <- l:
				return true
			case <-stop:
				return false
			}
		}
		for sc.Scan() {
			n++
			if !send(stdinLine{number: n, text: bytes.Clone(sc.Bytes())}) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			send(stdinLine{number: n + 1, err: err})
		}
	}()
	return lines
}

// lineAppender appends stdin's lines in batches and keeps count of what
// committed, so that every failure can say exactly which lines are in
// the stream and which line to resume from.
type lineAppender struct {
	c    *call
	drv  driver.Driver
	key  string
	opts *rheo.AppendBatchOptions

	// batch holds the lines read since the last commit, with their line
	// numbers.
	batch []rheo.BatchItem
	lines []int
	// appended counts the events committed; through is the last line of
	// stdin that they cover: every line up to it is appended or blank.
	appended  int64
	through   int
	summaries map[int]*appendSummary
	prog      *progress
}

// appendLines appends stdin's lines in batches and prints a summary per
// partition.
func (c *call) appendLines(drv driver.Driver, key string, opts *rheo.AppendBatchOptions) error {
	if isTerminal(c.stdin) {
		fmt.Fprintln(c.stderr, "reading one JSON object per line; end with Ctrl-D")
	}
	a := &lineAppender{c: c, drv: drv, key: key, opts: opts, summaries: map[int]*appendSummary{}, prog: c.newProgress()}
	defer a.prog.done()
	stop := make(chan struct{})
	defer close(stop)
	lines := readLines(c.stdin, stop)
	for {
		var (
			l  stdinLine
			ok bool
		)
		select {
		case <-c.ctx.Done():
			return a.failAt(a.next(), "interrupted")
		case l, ok = <-lines:
		}
		if !ok {
			break
		}
		if l.err != nil {
			if errors.Is(l.err, bufio.ErrTooLong) {
				return a.badLine(l.number, fmt.Sprintf("stdin line %d is longer than the limit of %d bytes (%d MiB) per line",
					l.number, maxLine, maxLine>>20))
			}
			return a.badLine(l.number, fmt.Sprintf("cannot read stdin line %d: %v", l.number, l.err))
		}
		text := bytes.TrimSpace(l.text)
		if len(text) == 0 {
			if len(a.batch) == 0 {
				a.through = l.number
			}
			continue
		}
		if problem := payloadProblem(l.number, text); problem != "" {
			return a.badLine(l.number, problem)
		}
		a.batch = append(a.batch, rheo.BatchItem{Payload: json.RawMessage(text), Key: key})
		a.lines = append(a.lines, l.number)
		if len(a.batch) == appendBatchSize {
			if err := a.flush(); err != nil {
				return err
			}
		}
	}
	if err := a.flush(); err != nil {
		return err
	}
	a.prog.done()
	return a.print()
}

// payloadProblem says why a non-blank stdin line cannot be a payload, or
// returns "". It checks what the drivers would refuse in a payload, so
// that the line is named rather than its place in a batch.
func payloadProblem(line int, text []byte) string {
	what := fmt.Sprintf("stdin line %d", line)
	if err := driverutil.CheckJSON(what, text); err != nil {
		return strings.TrimPrefix(err.Error(), rheo.ErrInvalidArgument.Reason+": ")
	}
	kind := "a JSON number"
	switch text[0] {
	case '{':
		return ""
	case '[':
		kind = "a JSON array"
	case '"':
		kind = "a JSON string"
	case 't', 'f':
		kind = "a JSON boolean"
	case 'n':
		kind = "JSON null"
	}
	return fmt.Sprintf("%s is %s, not a JSON object", what, kind)
}

// next is the first stdin line that is not appended yet.
func (a *lineAppender) next() int {
	if len(a.lines) > 0 {
		return a.lines[0]
	}
	return a.through + 1
}

// done says what is in the stream: the events appended and the lines of
// stdin they cover.
func (a *lineAppender) done() string {
	switch {
	case a.appended == 0:
		return "nothing was appended"
	case a.appended == 1:
		return "1 event appended (" + lineRange(1, a.through) + ")"
	}
	return fmt.Sprintf("%d events appended (%s)", a.appended, lineRange(1, a.through))
}

// resumeFrom says what is in the stream and the line to resume from,
// after which nothing was appended.
func (a *lineAppender) resumeFrom(line int) string {
	if a.appended == 0 {
		return fmt.Sprintf("nothing was appended; resume from line %d", line)
	}
	return fmt.Sprintf("%s, none from line %d on; resume from line %d", a.done(), line, line)
}

// lineRange names stdin lines first to last.
func lineRange(first, last int) string {
	if first == last {
		return fmt.Sprintf("stdin line %d", first)
	}
	return fmt.Sprintf("stdin lines %d to %d", first, last)
}

// failAt fails with what went wrong, what is appended, and the line to
// resume from.
func (a *lineAppender) failAt(resume int, what string) error {
	return failf("%s; %s", what, a.resumeFrom(resume))
}

// badLine appends the lines read before line (in a batch of their own),
// then fails naming line.
func (a *lineAppender) badLine(line int, problem string) error {
	if err := a.flush(); err != nil {
		return err
	}
	a.through = line - 1
	return failf("%s; %s once it is fixed", problem, a.resumeFrom(line))
}

// batchItem finds the item a driver's message names, such as "payload
// key 3 of the batch", in the messages of the SQL functions and of the
// SQLite driver.
var batchItem = regexp.MustCompile(`\b(payload key|payload|key|event id) (\d+) of the batch\b`)

// flush appends the batch. On a definite failure nothing of it is in
// the stream; when the batch failed for one of its lines, the lines
// before that one are appended first, so that the failure can name the
// line and have everything before it appended.
func (a *lineAppender) flush() error {
	if len(a.batch) == 0 {
		return nil
	}
	first, last := a.lines[0], a.lines[len(a.lines)-1]
	if err := a.c.ctx.Err(); err != nil {
		return a.failAt(first, "interrupted")
	}
	events, err := a.drv.AppendBatch(a.c.ctx, a.c.stream, a.batch, a.opts)
	switch {
	case errors.Is(err, rheo.ErrAmbiguous):
		return failf("whether the batch of %s (%d events) was appended is unknown: %s; "+
			"before it, %s; that batch is appended whole or not at all: if it was, resume from line %d, else from line %d "+
			"(see the stream's latest events with: rheo tail %s)",
			lineRange(first, last), len(a.batch), lostAnswer(err), a.done(), last+1, first, a.c.stream)
	case errors.Is(err, context.Canceled):
		return a.failAt(first, "interrupted")
	case err != nil:
		if m := batchItem.FindStringSubmatchIndex(err.Error()); m != nil && errors.Is(err, rheo.ErrInvalidArgument) {
			msg := err.Error()
			i, _ := strconv.Atoi(msg[m[4]:m[5]])
			if i >= 0 && i < len(a.lines) && msg[m[2]:m[3]] != "key" {
				line := a.lines[i]
				problem := strings.TrimPrefix(msg[:m[0]]+"the "+msg[m[2]:m[3]]+" of stdin line "+strconv.Itoa(line)+msg[m[1]:],
					rheo.ErrInvalidArgument.Reason+": ")
				a.batch, a.lines = a.batch[:i], a.lines[:i]
				if err := a.flush(); err != nil {
					return err
				}
				a.through = line - 1
				return failf("%s; %s once it is fixed", problem, a.resumeFrom(line))
			}
		}
		f := failf("the batch of %s was not appended: %s; %s", lineRange(first, last), a.c.describe(err), a.resumeFrom(first)).(*failure)
		f.usage = isUsage(err)
		return f
	}
	for _, ev := range events {
		s := a.summaries[ev.Partition]
		if s == nil {
			s = &appendSummary{Partition: ev.Partition, FirstSequence: ev.Sequence}
			a.summaries[ev.Partition] = s
		}
		s.Events++
		s.FirstSequence = min(s.FirstSequence, ev.Sequence)
		s.LastSequence = max(s.LastSequence, ev.Sequence)
	}
	a.appended += int64(len(events))
	a.through = last
	a.batch, a.lines = a.batch[:0], a.lines[:0]
	a.prog.show("append: %d events", a.appended)
	return nil
}

// print prints the summary of a complete append.
func (a *lineAppender) print() error {
	var parts []appendSummary
	for p := range a.summaries {
		parts = append(parts, *a.summaries[p])
	}
	slices.SortFunc(parts, func(x, y appendSummary) int { return x.Partition - y.Partition })
	out := struct {
		Stream     string          `json:"stream"`
		Appended   int64           `json:"appended"`
		Partitions []appendSummary `json:"partitions"`
	}{a.c.stream, a.appended, nonNil(parts)}
	return a.c.emit(out, func(w io.Writer) error {
		t := newTable("PARTITION", "EVENTS", "FIRST_SEQUENCE", "LAST_SEQUENCE")
		for _, s := range parts {
			t.add(s.Partition, s.Events, s.FirstSequence, s.LastSequence)
		}
		t.add("total", a.appended, blank{}, blank{})
		return t.write(w)
	})
}
