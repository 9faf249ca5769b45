package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
)

var (
	_ driver.Querier = (*Driver)(nil)
	_ driver.Querier = (*txOps)(nil)
)

// Query returns one page of the events of stream that q selects, with the
// cursor of the next page. It follows rheo.query_page of PostgreSQL step
// for step (see sql/functions/query.sql): the same checks in the same
// order, the same merge order and the same cursor positions. Cursors have
// the same form on both drivers, but each driver accepts only its own.
func (o ops) Query(ctx context.Context, stream string, q rheo.Query) (rheo.Page, error) {
	for name, v := range map[string]json.RawMessage{"payload": q.Payload, "metadata": q.Metadata} {
		if v == nil {
			continue
		}
		if err := checkJSON(name+" filter", v); err != nil {
			return rheo.Page{}, err
		}
	}
	var page rheo.Page
	err := o.runChecked(ctx, "query", []string{stream, q.Type, q.Key, q.After}, func(s *session) error {
		var err error
		page, err = s.queryPage(ctx, stream, q)
		return err
	})
	return page, err
}

// eventQuery is a checked Query: its filters ready for SQL and for the
// containment tests made in Go.
type eventQuery struct {
	rheo.Query
	maxCount int
	scope    []int
	// payload and metadata are the decoded patterns, nil when not given.
	payload, metadata any
	// correlationID and causationID are the string values of those
	// metadata keys in the pattern, "" when not strings: equalities
	// implied by the containment, written into the SQL for the indexes.
	correlationID, causationID string
	// payloadPaths and metadataPaths are the other string values of the
	// patterns, by JSON path: equalities the containment implies, which
	// SQLite tests far faster than Go decodes rows.
	payloadPaths, metadataPaths []stringPath
}

// stringPath is a string value of a pattern and its path ($.a.b).
type stringPath struct {
	path, value string
}

// checkQuery checks q against a stream of count partitions, in the order
// rheo.query_page does.
func checkQuery(q rheo.Query, count int) (eventQuery, error) {
	eq := eventQuery{Query: q}
	if q.Partition != nil {
		if p := *q.Partition; p < 0 || p >= count {
			return eq, driverutil.OutOfRange(p, count)
		}
		eq.scope = []int{*q.Partition}
	} else {
		eq.scope = driverutil.AllPartitions(count)
	}
	for _, f := range []struct {
		name    string
		pattern json.RawMessage
		dst     *any
	}{{"payload", q.Payload, &eq.payload}, {"metadata", q.Metadata, &eq.metadata}} {
		if f.pattern == nil {
			continue
		}
		if !driverutil.IsObject(f.pattern) {
			return eq, rheo.Errorf(rheo.ErrInvalidArgument, "filter %s must be a JSON object", f.name)
		}
		v, err := driverutil.DecodeJSON(f.pattern)
		if err != nil {
			return eq, rheo.Errorf(rheo.ErrInvalidArgument, "filter %s is not valid JSON", f.name)
		}
		*f.dst = v
	}
	if m, ok := eq.metadata.(map[string]any); ok {
		eq.correlationID, _ = m[rheo.MetaCorrelationID].(string)
		eq.causationID, _ = m[rheo.MetaCausationID].(string)
	}
	eq.payloadPaths = stringPaths(eq.payload, "$", nil)
	for _, sp := range stringPaths(eq.metadata, "$", nil) {
		if sp.path != "$."+rheo.MetaCorrelationID && sp.path != "$."+rheo.MetaCausationID {
			eq.metadataPaths = append(eq.metadataPaths, sp)
		}
	}
	if q.AfterSequence < 0 {
		return eq, rheo.Errorf(rheo.ErrInvalidArgument, "filter after_sequence must be an integer >= 0, got %d", q.AfterSequence)
	}
	if q.UntilSequence != nil && *q.UntilSequence < 0 {
		return eq, rheo.Errorf(rheo.ErrInvalidArgument, "filter until_sequence must be an integer >= 0, got %d", *q.UntilSequence)
	}
	eq.maxCount = driverutil.WithDefaults(&q).MaxCount
	if eq.maxCount < 0 {
		return eq, rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", eq.maxCount)
	}
	return eq, nil
}

// matches applies the containment filters, the ones SQL does not.
func (eq eventQuery) matches(ev rheo.Event) bool {
	for _, f := range []struct {
		pattern any
		doc     json.RawMessage
	}{{eq.payload, ev.Payload}, {eq.metadata, ev.Metadata}} {
		if f.pattern == nil {
			continue
		}
		doc, err := driverutil.DecodeJSON(f.doc)
		if err != nil || !driverutil.JSONContains(doc, f.pattern) {
			return false
		}
	}
	return true
}

func (s *session) queryPage(ctx context.Context, stream string, q rheo.Query) (rheo.Page, error) {
	count, err := s.stream(ctx, stream)
	if err != nil {
		return rheo.Page{}, err
	}
	eq, err := checkQuery(q, count)
	if err != nil {
		return rheo.Page{}, err
	}
	fingerprint, err := driverutil.QueryFingerprint(stream, q)
	if err != nil {
		return rheo.Page{}, err
	}

	// One transaction: the high watermarks and the events agree.
	hwm := make([]int64, len(eq.scope))
	rows, err := s.query(ctx, `
		SELECT p.high_watermark FROM rheo_partitions AS p
		 WHERE p.stream = ? AND p."partition" IN (SELECT value FROM json_each(?))
		 ORDER BY p."partition"`, stream, intsJSON(eq.scope))
	i := 0
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		err := rows.Scan(&hwm[i])
		i++
		return err
	})
	if err != nil {
		return rheo.Page{}, err
	}

	var pos []int64
	switch {
	case q.After != "":
		if pos, err = driverutil.DecodeQueryCursor(q.After, fingerprint, len(eq.scope)); err != nil {
			return rheo.Page{}, err
		}
	case q.Descending:
		// Pin the walk to what is visible now.
		pos = make([]int64, len(hwm))
		for i, h := range hwm {
			if q.UntilSequence != nil {
				h = min(h, *q.UntilSequence)
			}
			pos[i] = h + 1
		}
	default:
		pos = make([]int64, len(eq.scope))
		for i := range pos {
			pos[i] = q.AfterSequence
		}
	}
	if eq.maxCount == 0 {
		return rheo.Page{Events: []rheo.Event{}, Cursor: driverutil.EncodeQueryCursor(fingerprint, pos)}, nil
	}

	events := []rheo.Event{}
	for i, p := range eq.scope {
		found, err := s.queryPartition(ctx, stream, p, pos[i], eq)
		if err != nil {
			return rheo.Page{}, err
		}
		events = append(events, found...)
	}
	slices.SortFunc(events, func(a, b rheo.Event) int {
		c := compareEvents(a, b)
		if q.Descending {
			return -c
		}
		return c
	})
	events = events[:min(len(events), eq.maxCount)]
	advance(pos, hwm, eq, events)
	return rheo.Page{Events: events, Cursor: driverutil.EncodeQueryCursor(fingerprint, pos)}, nil
}

// compareEvents orders events by (sequence, partition).
func compareEvents(a, b rheo.Event) int {
	return cmp.Or(cmp.Compare(a.Sequence, b.Sequence), cmp.Compare(a.Partition, b.Partition))
}

// advance moves each position over what the page examined, as
// rheo.query_page does: a short page examined everything visible within
// the bounds; a full page ending at (s, p) examined, ascending, every
// event up to (s, p) in the merge order but never past the high
// watermark, and descending every event from (s, p) down.
func advance(pos, hwm []int64, eq eventQuery, page []rheo.Event) {
	if len(page) < eq.maxCount {
		for i := range pos {
			if eq.Descending {
				// Below AfterSequence + 1 nothing is left to match; at
				// the largest int64, a position at it leaves nothing
				// either, and adding 1 would overflow.
				pos[i] = min(eq.AfterSequence, math.MaxInt64-1) + 1
				continue
			}
			limit := hwm[i]
			if eq.UntilSequence != nil {
				limit = min(limit, *eq.UntilSequence)
			}
			pos[i] = max(pos[i], limit)
		}
		return
	}
	last := page[len(page)-1]
	for i, p := range eq.scope {
		if eq.Descending {
			bound := last.Sequence
			if p < last.Partition {
				bound++
			}
			pos[i] = min(pos[i], bound)
			continue
		}
		bound := last.Sequence
		if p > last.Partition {
			bound--
		}
		pos[i] = max(pos[i], min(hwm[i], bound))
	}
}

// queryPartition returns up to eq.maxCount events of one partition past
// position pos that match eq, in the query's order. The filters SQL can
// apply, it applies; the containment filters are tested here on the rows
// it returns, until enough match.
func (s *session) queryPartition(ctx context.Context, stream string, partition int, pos int64, eq eventQuery) ([]rheo.Event, error) {
	var where strings.Builder
	args := []any{stream, partition, pos}
	where.WriteString(`e.stream = ? AND e."partition" = ?`)
	if eq.Descending {
		where.WriteString(` AND e.sequence < ?`)
		if eq.AfterSequence != 0 {
			where.WriteString(` AND e.sequence > ?`)
			args = append(args, eq.AfterSequence)
		}
	} else {
		where.WriteString(` AND e.sequence > ?`)
		if eq.UntilSequence != nil {
			where.WriteString(` AND e.sequence <= ?`)
			args = append(args, *eq.UntilSequence)
		}
	}
	if eq.Type != "" {
		where.WriteString(` AND e.type = ?`)
		args = append(args, eq.Type)
	}
	if eq.Key != "" {
		where.WriteString(` AND e.key = ?`)
		args = append(args, eq.Key)
	}
	// The expressions of the lineage indexes (sql/sqlite/002), verbatim.
	if eq.correlationID != "" {
		where.WriteString(` AND (e.metadata ->> '$.correlation_id') = ?`)
		args = append(args, eq.correlationID)
	}
	if eq.causationID != "" {
		where.WriteString(` AND (e.metadata ->> '$.causation_id') = ?`)
		args = append(args, eq.causationID)
	}
	for _, sp := range eq.payloadPaths {
		where.WriteString(` AND (e.payload ->> ?) = ?`)
		args = append(args, sp.path, sp.value)
	}
	for _, sp := range eq.metadataPaths {
		where.WriteString(` AND (e.metadata ->> ?) = ?`)
		args = append(args, sp.path, sp.value)
	}
	if eq.From != nil {
		where.WriteString(` AND e.ts >= ?`)
		args = append(args, boundMicros(eq.From.Truncate(time.Microsecond)))
	}
	if eq.To != nil {
		where.WriteString(` AND e.ts <= ?`)
		args = append(args, boundMicros(eq.To.Truncate(time.Microsecond)))
	}
	order := ` ORDER BY e.sequence`
	if eq.Descending {
		order += ` DESC`
	}
	found := []rheo.Event{}
	rows, err := s.query(ctx, `SELECT `+eventColumns+` FROM rheo_events AS e WHERE `+where.String()+order, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for len(found) < eq.maxCount && rows.Next() {
		ev, err := scanEvent(rows, stream)
		if err != nil {
			return nil, err
		}
		if eq.matches(ev) {
			found = append(found, ev)
		}
	}
	return found, rows.Err()
}

// plainLabel is a key SQLite's JSON path syntax takes unquoted.
var plainLabel = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// stringPaths appends to out the string values that pattern reaches
// through objects only, with their paths below path, in key order. A
// document containing pattern has each of them at its path, so they can
// be tested in SQL before the containment is. Arrays, and keys that
// would need quoting in a path, are left to the containment test.
func stringPaths(pattern any, path string, out []stringPath) []stringPath {
	switch p := pattern.(type) {
	case string:
		return append(out, stringPath{path: path, value: p})
	case map[string]any:
		keys := slices.Sorted(maps.Keys(p))
		for _, k := range keys {
			if plainLabel.MatchString(k) {
				out = stringPaths(p[k], path+"."+k, out)
			}
		}
	}
	return out
}
