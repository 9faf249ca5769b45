package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/rheo-go/rheo"
)

// stream returns a stream's partition count; stream_not_found when it is
// missing.
func (s *session) stream(ctx context.Context, stream string) (int, error) {
	var count int
	err := s.queryRow(ctx, `SELECT partition_count FROM rheo_streams WHERE stream = ?`, stream).Scan(&count)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, rheo.Errorf(rheo.ErrStreamNotFound, "stream %q does not exist", stream)
	}
	return count, err
}

// groupRow is a group as the operations on it need it.
type groupRow struct {
	id             int64
	maxAttempts    int
	partitionCount int
	ordering       rheo.Ordering
}

// group looks a group up, stream first: stream_not_found, then
// group_not_found.
func (s *session) group(ctx context.Context, stream, group string) (groupRow, error) {
	var g groupRow
	var id, maxAttempts sql.NullInt64
	var ordering sql.NullString
	err := s.queryRow(ctx, `
		SELECT s.partition_count, g.group_id, g.max_attempts, g.ordering
		  FROM rheo_streams AS s
		  LEFT JOIN rheo_groups AS g ON g.stream = s.stream AND g.group_name = ?2
		 WHERE s.stream = ?1`, stream, group).Scan(&g.partitionCount, &id, &maxAttempts, &ordering)
	if errors.Is(err, sql.ErrNoRows) {
		return g, rheo.Errorf(rheo.ErrStreamNotFound, "stream %q does not exist", stream)
	}
	if err != nil {
		return g, err
	}
	if !id.Valid {
		return g, rheo.Errorf(rheo.ErrGroupNotFound, "group %q does not exist on stream %q", group, stream)
	}
	g.id, g.maxAttempts, g.ordering = id.Int64, int(maxAttempts.Int64), rheo.Ordering(ordering.String)
	return g, nil
}
