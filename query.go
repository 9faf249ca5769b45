package rheo

import (
	"encoding/json"
	"time"
)

// Query selects events of a stream's history, one page at a time. Every
// field is optional; the zero Query selects every event, oldest first, in
// pages of 100. The filters combine with AND.
//
// Events come in (sequence, partition) order, or the reverse when
// Descending. Paging with the cursor of each page never skips and never
// repeats an event, even while events keep arriving (see docs/query.md).
type Query struct {
	// Type matches the payload's "type" field exactly. "" matches any
	// type.
	Type string
	// Key matches the effective routing key exactly. "" matches any key.
	Key string
	// Partition, when set, limits the query to one partition.
	Partition *int
	// Payload is a JSON object the payload must contain, as
	// PostgreSQL's @> decides: objects match by subset recursively,
	// arrays by containing each element, scalars by JSON equality (1 and
	// 1.0 are equal, "1" and 1 are not).
	Payload json.RawMessage
	// Metadata is a JSON object the metadata must contain, like Payload.
	// Lineage.Metadata builds one for lineage lookups.
	Metadata json.RawMessage
	// From, when set, keeps events with TS at or after it.
	From *time.Time
	// To, when set, keeps events with TS at or before it.
	To *time.Time
	// AfterSequence keeps events whose sequence is greater. Defaults to
	// 0, every event.
	AfterSequence int64
	// UntilSequence, when set, keeps events whose sequence is at most it.
	UntilSequence *int64

	// MaxCount is the most events of a page. Defaults to 100.
	MaxCount int
	// After is the Cursor of the previous page; "" starts at the
	// beginning (at the end when Descending). A cursor is valid only for
	// the stream, filters and direction that issued it.
	After string
	// Descending returns the newest events first. A descending walk
	// covers the events present when its first page was read.
	Descending bool
}

// Page is one page of a Query.
type Page struct {
	// Events are the page's events in query order.
	Events []Event `json:"events"`
	// Cursor continues the query after this page: pass it as Query.After.
	// It is set on every page, also an empty one. A page shorter than
	// MaxCount means that no more events matched when it was read;
	// ascending, later appends may still match, and the cursor finds
	// them.
	Cursor string `json:"cursor"`
}

// Filter returns q's filters as the filter object of the SQL function
// rheo.query, holding only the filters that are set: "type", "key",
// "partition", "payload", "metadata", "from", "to", "after_sequence" and
// "until_sequence". From and To are RFC 3339 in UTC, cut to whole
// microseconds, the precision events are stored with; outside the years
// 0001 to 9999, where no event's ts can be, they are "-infinity" or
// "infinity", which compare the same. Payload or Metadata that is not
// valid JSON is invalid_argument.
func (q Query) Filter() (json.RawMessage, error) {
	filter := map[string]any{}
	if q.Type != "" {
		filter["type"] = q.Type
	}
	if q.Key != "" {
		filter["key"] = q.Key
	}
	if q.Partition != nil {
		filter["partition"] = *q.Partition
	}
	for name, v := range map[string]json.RawMessage{"payload": q.Payload, "metadata": q.Metadata} {
		if v == nil {
			continue
		}
		if !json.Valid(v) {
			return nil, Errorf(ErrInvalidArgument, "the %s filter is not valid JSON", name)
		}
		filter[name] = v
	}
	if q.From != nil {
		filter["from"] = filterTime(*q.From)
	}
	if q.To != nil {
		filter["to"] = filterTime(*q.To)
	}
	if q.AfterSequence != 0 {
		filter["after_sequence"] = q.AfterSequence
	}
	if q.UntilSequence != nil {
		filter["until_sequence"] = *q.UntilSequence
	}
	return json.Marshal(filter)
}

// filterTime renders a From or To bound for the SQL filter. Times before
// the year 0001 or after 9999 (where PostgreSQL's input cannot take every
// one of them, and no event's ts can be) are the infinities.
func filterTime(t time.Time) string {
	t = t.UTC()
	switch {
	case t.Year() < 1:
		return "-infinity"
	case t.Year() > 9999:
		return "infinity"
	}
	return t.Truncate(time.Microsecond).Format(time.RFC3339Nano)
}
