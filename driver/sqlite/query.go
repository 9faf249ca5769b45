package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"maps"
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

// eventQuery is a checked Query (driverutil.QueryScan) with its filters
// ready for SQL; the containment tests are made in Go.
type eventQuery struct {
	driverutil.QueryScan
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
	scan, err := driverutil.CheckQuery(q, count)
	eq := eventQuery{QueryScan: scan}
	if err != nil {
		return eq, err
	}
	if m, ok := eq.Metadata.(map[string]any); ok {
		eq.correlationID, _ = m[rheo.MetaCorrelationID].(string)
		eq.causationID, _ = m[rheo.MetaCausationID].(string)
	}
	eq.payloadPaths = stringPaths(eq.Payload, "$", nil)
	for _, sp := range stringPaths(eq.Metadata, "$", nil) {
		if sp.path != "$."+rheo.MetaCorrelationID && sp.path != "$."+rheo.MetaCausationID {
			eq.metadataPaths = append(eq.metadataPaths, sp)
		}
	}
	return eq, nil
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
	hwm := make([]int64, len(eq.Scope))
	rows, err := s.query(ctx, `
		SELECT p.high_watermark FROM rheo_partitions AS p
		 WHERE p.stream = ? AND p."partition" IN (SELECT value FROM json_each(?))
		 ORDER BY p."partition"`, stream, intsJSON(eq.Scope))
	i := 0
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		err := rows.Scan(&hwm[i])
		i++
		return err
	})
	if err != nil {
		return rheo.Page{}, err
	}

	pos, err := eq.Start(fingerprint, hwm)
	if err != nil {
		return rheo.Page{}, err
	}
	if eq.MaxCount == 0 {
		return rheo.Page{Events: []rheo.Event{}, Cursor: driverutil.EncodeQueryCursor(fingerprint, pos)}, nil
	}

	events := []rheo.Event{}
	for i, p := range eq.Scope {
		found, err := s.queryPartition(ctx, stream, p, pos[i], eq)
		if err != nil {
			return rheo.Page{}, err
		}
		events = append(events, found...)
	}
	events = eq.Cut(events)
	eq.Advance(pos, hwm, events)
	return rheo.Page{Events: events, Cursor: driverutil.EncodeQueryCursor(fingerprint, pos)}, nil
}

// queryPartition returns up to eq.MaxCount events of one partition past
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
	for len(found) < eq.MaxCount && rows.Next() {
		ev, err := scanEvent(rows, stream)
		if err != nil {
			return nil, err
		}
		if eq.Contains(ev) {
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
