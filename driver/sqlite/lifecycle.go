package sqlite

import (
	"context"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// DropGroup removes a group with its deliveries, dead letters and
// cursors; its leases become stale.
func (o ops) DropGroup(ctx context.Context, stream, group string, opts *rheo.DropOptions) error {
	confirm := opts != nil && opts.Confirm
	return o.runChecked(ctx, "drop_group", []string{stream, group}, func(s *session) error {
		return s.dropGroup(ctx, stream, group, confirm)
	})
}

// DropStream removes a stream, its groups and every event, and returns
// how many events it deleted.
func (o ops) DropStream(ctx context.Context, stream string, opts *rheo.DropOptions) (int64, error) {
	confirm := opts != nil && opts.Confirm
	var n int64
	err := o.runChecked(ctx, "drop_stream", []string{stream}, func(s *session) error {
		var err error
		n, err = s.dropStream(ctx, stream, confirm)
		return err
	})
	return n, err
}

// SetOrdering changes a group's ordering from its next fetch on; any
// word but none, key and partition is invalid_argument. It reads the
// clock when it leaves key (the blocked events become due at it).
func (o ops) SetOrdering(ctx context.Context, stream, group string, ordering rheo.Ordering) error {
	return o.runChecked(ctx, "set_ordering", []string{stream, group, string(ordering)}, func(s *session) error {
		return s.setOrdering(ctx, stream, group, ordering)
	})
}

func confirmRequired(op, what string) error {
	return rheo.Errorf(rheo.ErrConfirmRequired, "%s %s: call it with confirm", op, what)
}

// groupsOf selects the group ids of stream ?1.
const groupsOf = `(SELECT g.group_id FROM rheo_groups AS g WHERE g.stream = ?1)`

func (s *session) dropGroup(ctx context.Context, stream, group string, confirm bool) error {
	if !confirm {
		return confirmRequired("drop_group", "removes the group with its deliveries, dead letters and cursors")
	}
	g, err := s.group(ctx, stream, group)
	if err != nil {
		return err
	}
	// Deleting the deliveries makes the group's leases stale: a settle
	// finds no delivery under its lease id. Group ids are never reused
	// (AUTOINCREMENT), so a group created anew under the name starts
	// empty.
	for _, q := range []string{
		`DELETE FROM rheo_deliveries WHERE group_id = ?`,
		`DELETE FROM rheo_dead_letters WHERE group_id = ?`,
		`DELETE FROM rheo_cursors WHERE group_id = ?`,
		`DELETE FROM rheo_groups WHERE group_id = ?`,
	} {
		if _, err := s.exec(ctx, q, g.id); err != nil {
			return err
		}
	}
	return nil
}

func (s *session) dropStream(ctx context.Context, stream string, confirm bool) (int64, error) {
	if !confirm {
		return 0, confirmRequired("drop_stream", "removes the stream, its groups and every event")
	}
	if _, err := s.stream(ctx, stream); err != nil {
		return 0, err
	}
	for _, q := range []string{
		`DELETE FROM rheo_deliveries WHERE group_id IN ` + groupsOf,
		`DELETE FROM rheo_dead_letters WHERE group_id IN ` + groupsOf,
		`DELETE FROM rheo_cursors WHERE group_id IN ` + groupsOf,
		`DELETE FROM rheo_groups WHERE stream = ?1`,
	} {
		if _, err := s.exec(ctx, q, stream); err != nil {
			return 0, err
		}
	}
	if _, err := s.exec(ctx, `
		INSERT INTO rheo_event_deletions (stream, "partition", through)
		SELECT p.stream, p."partition", p.high_watermark FROM rheo_partitions AS p WHERE p.stream = ?1`, stream); err != nil {
		return 0, err
	}
	// The count of a DELETE leaves out what its triggers did; the guard
	// deletes nothing anyway.
	res, err := s.exec(ctx, `DELETE FROM rheo_events WHERE stream = ?1`, stream)
	if err != nil {
		return 0, err
	}
	deleted, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	for _, q := range []string{
		`DELETE FROM rheo_event_deletions WHERE stream = ?1`,
		`DELETE FROM rheo_time_marks WHERE stream = ?1`,
		`DELETE FROM rheo_partitions WHERE stream = ?1`,
		`DELETE FROM rheo_streams WHERE stream = ?1`,
	} {
		if _, err := s.exec(ctx, q, stream); err != nil {
			return 0, err
		}
	}
	return deleted, nil
}

// setOrdering sets a group's ordering. Leaving key, the events blocked
// behind their keys become pending and due at the clock, attempt
// unchanged, as on PostgreSQL: what the other orderings make of them, so
// that their fetches never meet a blocked row. Entering key writes
// nothing else: the next fetch blocks what must wait.
func (s *session) setOrdering(ctx context.Context, stream, group string, ordering rheo.Ordering) error {
	g, err := s.group(ctx, stream, group)
	if err != nil {
		return err
	}
	if err := checkOrdering(ordering); err != nil {
		return err
	}
	if _, err := s.exec(ctx, `UPDATE rheo_groups SET ordering = ? WHERE group_id = ?`, string(ordering), g.id); err != nil {
		return err
	}
	if ordering == rheo.OrderingKey {
		if g.ordering == rheo.OrderingKey {
			return nil
		}
		// The other orderings do not store the events' keys in their
		// deliveries (leaseFresh): the deliveries in progress get them
		// now, so that the later events of their keys wait for them.
		_, err := s.exec(ctx, `
			UPDATE rheo_deliveries
			   SET key = (SELECT e.key FROM rheo_events AS e
			               WHERE e.stream = ?2 AND e."partition" = rheo_deliveries."partition"
			                 AND e.sequence = rheo_deliveries.sequence)
			 WHERE group_id = ?1 AND key IS NULL`, g.id, stream)
		return err
	}
	_, err = s.exec(ctx, `
		UPDATE rheo_deliveries INDEXED BY rheo_deliveries_blocked
		   SET state = 'pending', expires_at = ?2
		 WHERE group_id = ?1 AND state = 'blocked'`, g.id, s.now)
	return err
}

// CreateStream creates a stream with partitionCount partitions.
func (o ops) CreateStream(ctx context.Context, stream string, partitionCount int) error {
	return o.runClocked(ctx, "create_stream", []string{stream}, func(s *session) error {
		return s.createStream(ctx, stream, partitionCount)
	})
}

// CreateGroup creates a consumer group. opts may be nil; an empty
// Ordering is OrderingNone.
func (o ops) CreateGroup(ctx context.Context, stream, group string, opts *rheo.CreateGroupOptions) error {
	opts = driverutil.WithDefaults(opts)
	maxAttempts := opts.MaxAttempts
	// As on PostgreSQL, whose column is an int.
	if _, err := driverutil.Int32("max_attempts", maxAttempts); err != nil {
		return err
	}
	ordering := opts.Ordering
	return o.runClocked(ctx, "create_group", []string{stream, group, string(ordering)}, func(s *session) error {
		return s.createGroup(ctx, stream, group, maxAttempts, start{after: opts.StartAfter, at: opts.StartAt},
			opts.Partitions, ordering)
	})
}

// ResetGroup drops a group's deliveries and places its cursors anew.
func (o ops) ResetGroup(ctx context.Context, stream, group string, opts *rheo.ResetOptions) error {
	if opts == nil {
		opts = &rheo.ResetOptions{}
	}
	return o.runClocked(ctx, "reset_group", []string{stream, group}, func(s *session) error {
		return s.resetGroup(ctx, stream, group, *opts)
	})
}

// resetGroup drops a group's leases, pending retries and dead letters in
// the listed partitions and places its cursors as createGroup would. The
// log is untouched.
func (s *session) resetGroup(ctx context.Context, stream, group string, o rheo.ResetOptions) error {
	if !o.Confirm {
		return rheo.Errorf(rheo.ErrConfirmRequired, "reset_group drops leases, retries and dead letters: call it with confirm")
	}
	g, err := s.group(ctx, stream, group)
	if err != nil {
		return err
	}
	st := start{after: o.StartAfter, at: o.StartAt}
	if err := st.check(); err != nil {
		return err
	}
	scope, err := partitionScope(o.Partitions, g.partitionCount)
	if err != nil {
		return err
	}
	scopeJSON := intsJSON(scope)
	for _, q := range []string{
		`DELETE FROM rheo_deliveries WHERE group_id = ? AND "partition" IN (SELECT value FROM json_each(?))`,
		`DELETE FROM rheo_dead_letters WHERE group_id = ? AND "partition" IN (SELECT value FROM json_each(?))`,
	} {
		if _, err := s.exec(ctx, q, g.id, scopeJSON); err != nil {
			return err
		}
	}
	return s.placeCursors(ctx, g.id, stream, scope, st)
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
	if partitionCount < 1 || partitionCount > driverutil.MaxPartitionCount {
		return rheo.Errorf(rheo.ErrInvalidPartitionCount, "partition_count must be between 1 and %d, got %d",
			driverutil.MaxPartitionCount, partitionCount)
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
		return driverutil.CheckSequence("start_after", *st.after)
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
