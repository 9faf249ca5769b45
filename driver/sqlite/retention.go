package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// SetRetention sets a stream's max age, stored in whole microseconds; 0
// removes it.
func (o ops) SetRetention(ctx context.Context, stream string, maxAge time.Duration) error {
	var micros *int64
	if maxAge != 0 {
		us := driverutil.Micros(maxAge)
		micros = &us
	}
	return o.runChecked(ctx, "set_retention", []string{stream}, func(s *session) error {
		return s.setRetention(ctx, stream, micros)
	})
}

// Prune deletes up to MaxCount of a stream's events past its retention
// and returns how many. opts may be nil.
func (o ops) Prune(ctx context.Context, stream string, opts *rheo.PruneOptions) (int64, error) {
	opts = driverutil.WithDefaults(opts)
	maxCount := opts.MaxCount
	var n int64
	err := o.runClocked(ctx, "prune", []string{stream}, func(s *session) error {
		var err error
		n, err = s.prune(ctx, stream, maxCount, opts.Force)
		return err
	})
	return n, err
}

// setRetention sets the stream's max age in microseconds; nil removes
// it.
func (s *session) setRetention(ctx context.Context, stream string, micros *int64) error {
	if _, err := s.stream(ctx, stream); err != nil {
		return err
	}
	if micros != nil && *micros <= 0 {
		return rheo.Errorf(rheo.ErrInvalidArgument, "max_age must be positive, got %s", time.Duration(*micros)*time.Microsecond)
	}
	_, err := s.exec(ctx, `UPDATE rheo_streams SET max_age = ?2 WHERE stream = ?1`, stream, micros)
	return err
}

// prune deletes, partition by partition in order, each partition's
// longest run of lowest sequences that are older than the stream's
// retention and (unless force) passed by every group, at most maxCount
// in all, and returns how many it deleted.
func (s *session) prune(ctx context.Context, stream string, maxCount int, force bool) (int64, error) {
	var count int
	var maxAge sql.NullInt64
	err := s.queryRow(ctx, `SELECT partition_count, max_age FROM rheo_streams WHERE stream = ?`, stream).Scan(&count, &maxAge)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, rheo.Errorf(rheo.ErrStreamNotFound, "stream %q does not exist", stream)
	}
	if err != nil {
		return 0, err
	}
	if maxCount < 0 {
		return 0, rheo.Errorf(rheo.ErrInvalidArgument, "max_count must be >= 0, got %d", maxCount)
	}
	if !maxAge.Valid {
		return 0, nil // no retention: kept forever
	}
	cutoff := s.now - maxAge.Int64
	var total int64
	for p := 0; p < count && total < int64(maxCount); p++ {
		last, err := s.prunable(ctx, stream, p, cutoff, int64(maxCount)-total, force)
		if err != nil {
			return 0, err
		}
		n, err := s.pruneThrough(ctx, stream, p, last, force)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// prunable returns the last sequence of partition p that prune may
// delete: the end of the run from the low watermark, at most limit long,
// of events with ts < cutoff and (unless force) at or below every
// group's frontier. Below the low watermark, nothing.
func (s *session) prunable(ctx context.Context, stream string, p int, cutoff, limit int64, force bool) (int64, error) {
	var low, high int64
	// The lowest frontier over the stream's groups: the lowest delivery
	// in progress minus one, or the cursor minus one (as in lag); NULL
	// without groups.
	var frontier sql.NullInt64
	if err := s.queryRow(ctx, `
		SELECT p.low_watermark, p.high_watermark,
		       (SELECT min(coalesce((SELECT d.sequence FROM rheo_deliveries AS d
		                              WHERE d.group_id = c.group_id AND d."partition" = c."partition"
		                              ORDER BY d.sequence LIMIT 1),
		                            c.next_sequence) - 1)
		          FROM rheo_cursors AS c
		         WHERE c.group_id IN `+groupsOf+` AND c."partition" = ?2)
		  FROM rheo_partitions AS p
		 WHERE p.stream = ?1 AND p."partition" = ?2`, stream, p).Scan(&low, &high, &frontier); err != nil {
		return 0, err
	}
	last := low - 1 + min(limit, high-low+1)
	if frontier.Valid && !force {
		last = min(last, frontier.Int64)
	}
	if last < low {
		return low - 1, nil
	}
	// The first event not old enough stops the partition, so no hole
	// opens: an older event behind a younger one waits. The range read is
	// at most limit events of the primary key.
	var young sql.NullInt64
	if err := s.queryRow(ctx, `
		SELECT min(e.sequence) FROM rheo_events AS e
		 WHERE e.stream = ?1 AND e."partition" = ?2 AND e.sequence BETWEEN ?3 AND ?4 AND e.ts >= ?5`,
		stream, p, low, last, cutoff).Scan(&young); err != nil {
		return 0, err
	}
	if young.Valid {
		last = young.Int64 - 1
	}
	return last, nil
}

// pruneThrough deletes the events of partition p from its low watermark
// through last, with the dead letters of every group on them and their
// time marks, and raises the low watermark past them. With force it also
// deletes the groups' deliveries of them (their leases become stale) and
// moves the cursors still at or below last past it. It returns how many
// events it deleted.
func (s *session) pruneThrough(ctx context.Context, stream string, p int, last int64, force bool) (int64, error) {
	var low int64
	if err := s.queryRow(ctx, `SELECT low_watermark FROM rheo_partitions WHERE stream = ?1 AND "partition" = ?2`,
		stream, p).Scan(&low); err != nil {
		return 0, err
	}
	if last < low {
		return 0, nil
	}
	// The permit the delete guard looks for (sql/sqlite/004_lifecycle.sql),
	// removed again before the transaction ends.
	if _, err := s.exec(ctx, `INSERT INTO rheo_event_deletions (stream, "partition", through) VALUES (?1, ?2, ?3)`,
		stream, p, last); err != nil {
		return 0, err
	}
	res, err := s.exec(ctx, `
		DELETE FROM rheo_events WHERE stream = ?1 AND "partition" = ?2 AND sequence BETWEEN ?3 AND ?4`,
		stream, p, low, last)
	if err != nil {
		return 0, err
	}
	deleted, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	statements := []string{
		`DELETE FROM rheo_event_deletions WHERE stream = ?1 AND "partition" = ?2`,
		`DELETE FROM rheo_dead_letters WHERE group_id IN ` + groupsOf + ` AND "partition" = ?2 AND sequence <= ?3`,
		`DELETE FROM rheo_time_marks WHERE stream = ?1 AND "partition" = ?2 AND sequence <= ?3`,
		`UPDATE rheo_partitions SET low_watermark = ?3 + 1 WHERE stream = ?1 AND "partition" = ?2`,
	}
	if force {
		statements = append(statements,
			`UPDATE rheo_cursors SET next_sequence = ?3 + 1
			  WHERE group_id IN `+groupsOf+` AND "partition" = ?2 AND next_sequence <= ?3`)
	}
	for _, q := range statements {
		if _, err := s.exec(ctx, q, stream, p, last); err != nil {
			return 0, err
		}
	}
	if !force {
		return deleted, nil
	}
	// The deliveries of the deleted events go, and the keys they held
	// back are unblocked.
	rows, err := s.query(ctx, `
		DELETE FROM rheo_deliveries WHERE group_id IN `+groupsOf+` AND "partition" = ?2 AND sequence <= ?3
		RETURNING group_id, "partition", key`, stream, p, last)
	keys, err := scanKeys(rows, err)
	if err != nil {
		return 0, err
	}
	return deleted, s.unblock(ctx, keys)
}
