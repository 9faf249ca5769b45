package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
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

func (s *session) createStream(ctx context.Context, stream string, partitionCount int) error {
	if !validName.MatchString(stream) {
		return rheo.Errorf(rheo.ErrInvalidArgument, "invalid stream name %q: %s", stream, nameRule)
	}
	var exists bool
	if err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM rheo_streams WHERE stream = ?)`, stream).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return rheo.Errorf(rheo.ErrAlreadyExists, "stream %q already exists", stream)
	}
	if partitionCount < 1 || partitionCount > driver.MaxPartitionCount {
		return rheo.Errorf(rheo.ErrInvalidPartitionCount, "partition_count must be between 1 and %d, got %d",
			driver.MaxPartitionCount, partitionCount)
	}
	if _, err := s.exec(ctx, `INSERT INTO rheo_streams (stream, partition_count, created_at) VALUES (?, ?, ?)`,
		stream, partitionCount, s.now); err != nil {
		return err
	}
	_, err := s.exec(ctx, `
		INSERT INTO rheo_partitions (stream, "partition", high_watermark)
		WITH RECURSIVE p(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM p WHERE n + 1 < ?2)
		SELECT ?1, n, 0 FROM p`, stream, partitionCount)
	return err
}

// start is where create_group and reset_group place cursors: after a
// sequence, at a time, or (neither) at the beginning.
type start struct {
	after *int64
	at    *time.Time
}

func (st start) check() error {
	if st.after != nil && st.at != nil {
		return rheo.Errorf(rheo.ErrInvalidArgument, "give start_after or start_at, not both")
	}
	if st.after != nil {
		return driver.CheckSequence("start_after", *st.after)
	}
	return nil
}

// checkOrdering reports a word other than none, key and partition as
// invalid_argument.
func checkOrdering(o rheo.Ordering) error {
	switch o {
	case rheo.OrderingNone, rheo.OrderingKey, rheo.OrderingPartition:
		return nil
	}
	return rheo.Errorf(rheo.ErrInvalidArgument, "ordering must be none, key or partition, got %q", string(o))
}

func (s *session) createGroup(ctx context.Context, stream, group string, maxAttempts int, st start, partitions []int, ordering rheo.Ordering) error {
	count, err := s.stream(ctx, stream)
	if err != nil {
		return err
	}
	if !validName.MatchString(group) {
		return rheo.Errorf(rheo.ErrInvalidArgument, "invalid group name %q: %s", group, nameRule)
	}
	var exists bool
	if err := s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM rheo_groups WHERE stream = ? AND group_name = ?)`,
		stream, group).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return rheo.Errorf(rheo.ErrAlreadyExists, "group %q already exists on stream %q", group, stream)
	}
	if maxAttempts < 1 {
		return rheo.Errorf(rheo.ErrInvalidArgument, "max_attempts must be >= 1, got %d", maxAttempts)
	}
	if err := st.check(); err != nil {
		return err
	}
	scope, err := partitionScope(partitions, count)
	if err != nil {
		return err
	}
	if err := checkOrdering(ordering); err != nil {
		return err
	}

	var groupID int64
	if err := s.queryRow(ctx, `
		INSERT INTO rheo_groups (stream, group_name, max_attempts, created_at, ordering) VALUES (?, ?, ?, ?, ?)
		RETURNING group_id`, stream, group, maxAttempts, s.now, string(ordering)).Scan(&groupID); err != nil {
		return err
	}
	if _, err := s.exec(ctx, `
		INSERT INTO rheo_cursors (group_id, "partition", next_sequence)
		SELECT ?1, "partition", low_watermark FROM rheo_partitions WHERE stream = ?2`, groupID, stream); err != nil {
		return err
	}
	if st.after == nil && st.at == nil {
		return nil
	}
	return s.placeCursors(ctx, groupID, stream, scope, st)
}

// placeCursors places a group's cursors in the given partitions: after
// st.after, at the first event with ts >= st.at (or past the high
// watermark when there is none), or at the beginning; never below the
// low watermark, since pruned events count as terminal.
func (s *session) placeCursors(ctx context.Context, groupID int64, stream string, scope []int, st start) error {
	var at *int64
	if st.at != nil {
		us := boundMicros(*st.at)
		at = &us
	}
	_, err := s.exec(ctx, `
		UPDATE rheo_cursors AS c
		   SET next_sequence = max(
		           (SELECT p.low_watermark FROM rheo_partitions AS p
		             WHERE p.stream = ?2 AND p."partition" = c."partition"),
		           CASE
		               WHEN ?3 IS NOT NULL THEN ?3 + 1
		               WHEN ?4 IS NOT NULL THEN coalesce(
		                   `+firstAtSQL("?2", `c."partition"`, "?4")+`,
		                   (SELECT p.high_watermark + 1 FROM rheo_partitions AS p
		                     WHERE p.stream = ?2 AND p."partition" = c."partition"))
		               ELSE 1
		           END)
		 WHERE c.group_id = ?1 AND c."partition" IN (SELECT value FROM json_each(?5))`,
		groupID, stream, st.after, at, intsJSON(scope))
	return err
}

func (s *session) listStreams(ctx context.Context) ([]rheo.StreamInfo, error) {
	streams := []rheo.StreamInfo{}
	rows, err := s.query(ctx, `SELECT stream, partition_count, created_at FROM rheo_streams ORDER BY stream`)
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var info rheo.StreamInfo
		var createdAt int64
		if err := rows.Scan(&info.Name, &info.PartitionCount, &createdAt); err != nil {
			return err
		}
		info.CreatedAt = fromMicros(createdAt)
		streams = append(streams, info)
		return nil
	})
	return streams, err
}

func (s *session) listGroups(ctx context.Context, stream string) ([]rheo.GroupSummary, error) {
	if _, err := s.stream(ctx, stream); err != nil {
		return nil, err
	}
	groups := []rheo.GroupSummary{}
	rows, err := s.query(ctx, `
		SELECT group_name, max_attempts, created_at, ordering FROM rheo_groups WHERE stream = ? ORDER BY group_name`, stream)
	err = scanAll(rows, err, func(rows *sql.Rows) error {
		var g rheo.GroupSummary
		var createdAt int64
		if err := rows.Scan(&g.Name, &g.MaxAttempts, &createdAt, (*string)(&g.Ordering)); err != nil {
			return err
		}
		g.CreatedAt = fromMicros(createdAt)
		groups = append(groups, g)
		return nil
	})
	return groups, err
}
