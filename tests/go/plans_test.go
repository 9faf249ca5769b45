package tests

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIndexPaths runs the operations whose cost must not grow with the
// log or with the work in flight on a loaded stream (200,000 events over
// two partitions, 100,000 leases in flight), and checks, from the plans
// of every statement they run (auto_explain) and from the rows each call
// reads (pg_stat_xact_user_tables), that they read by index and only a
// bounded number of rows: a group 10,000 events behind asks group_info,
// replay by time and start_at look for a time near the end, and a fetch
// of one finds the lease due among the 100,000 in flight.
func TestIndexPaths(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: builds a log of 200,000 events")
	}
	ctx, cancel := context.WithTimeout(context.Background(), concTimeout)
	defer cancel()
	conn, plans := planConn(ctx, t)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := conn.Exec(ctx, sql, args...)
		require.NoError(t, err, "%s", sql)
	}

	const (
		perPartition = 100_000
		behind       = 10_000
		inFlight     = 50_000 // per partition
	)
	exec(`SET rheo.notify = 'off'`)
	exec(`SELECT rheo.create_stream('loaded', 2)`)
	// All but the last `behind` events of each partition at 00:00, the
	// rest at 01:00.
	for p := range 2 {
		for first := 1; first <= perPartition; first += 10_000 {
			clock := "2030-01-01 00:00Z"
			if first > perPartition-behind {
				clock = "2030-01-01 01:00Z"
			}
			exec(`SELECT count(*) FROM rheo.append_batch('loaded',
				(SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, 10000) n),
				"partition" => $1, clock => $2)`, p, clock)
		}
	}
	exec(`SELECT rheo.create_group('loaded', 'behind', start_after => $1)`, perPartition-behind)
	exec(`SELECT rheo.create_group('loaded', 'busy')`)
	exec(`SELECT count(*) FROM rheo.fetch('loaded', 'busy', max_count => $1, lease_ms => 3600000,
		clock => '2030-01-01 02:00Z')`, 2*inFlight)
	// One lease of the 100,000 is renewed to expire early, which brings
	// its partition's expiry mark down: the fetch below must find it, by
	// the index of due times, without reading the others.
	exec(`SELECT rheo.renew(d.lease_id, lease_ms => 1000, clock => '2030-01-01 02:00Z')
	        FROM rheo.deliveries d JOIN rheo.groups g USING (group_id)
	       WHERE g.group_name = 'busy' AND d."partition" = 1 AND d.sequence = 777`)
	exec(`LOAD 'auto_explain'`)
	exec(`SET auto_explain.log_min_duration = 0`)
	exec(`SET auto_explain.log_nested_statements = on`)
	exec(`SET client_min_messages = log`)

	// Once before the tables have statistics, as on a new install, and
	// once after.
	for round, stats := range []string{"without statistics", "with statistics"} {
		if round == 1 {
			exec(`VACUUM ANALYZE rheo.events, rheo.deliveries, rheo.time_marks`)
		}
		for _, tc := range []struct {
			name string
			sql  string
			// at most this many rows of each table read by the call
			events, deliveries, marks int64
			want                      string // an index the plans must use
		}{
			{"group_info of a group far behind", `SELECT * FROM rheo.group_info('loaded', 'behind')`,
				2 * 1024, 0, 2 * (behind/1024 + 1), "time_marks_pkey"},
			{"group_info of a group with 100,000 leases in flight", `SELECT * FROM rheo.group_info('loaded', 'busy', clock => '2030-01-01 02:00Z')`,
				2 * 1024, 2*inFlight + 8, 2 * (perPartition/2/1024 + 1), "deliveries_pkey"},
			{"replay by time near the end of the log", `SELECT rheo.replay('loaded', 'behind', from_ts => '2030-01-01 01:00Z')`,
				2 * 1024, 0, 4, "time_marks_max_ts_idx"},
			{"start_at near the end of the log", fmt.Sprintf(`SELECT rheo.create_group('loaded', 'late-%d', start_at => '2030-01-01 01:00Z')`, round),
				2 * 1024, 0, 4, "time_marks_max_ts_idx"},
			{"fetch of one with 100,000 leases in flight", `SELECT count(*) FROM rheo.fetch('loaded', 'busy', max_count => 1,
				clock => '2030-01-01 02:00:02Z')`, 2, 8, 0, "deliveries_due_idx"},
		} {
			t.Run(stats+"/"+tc.name, func(t *testing.T) {
				plans.reset()
				read, err := rowsRead(ctx, conn, tc.sql)
				require.NoError(t, err)
				for table, limit := range map[string]int64{"events": tc.events, "deliveries": tc.deliveries, "time_marks": tc.marks} {
					assert.LessOrEqual(t, read[table], limit, "rows read of rheo.%s; plans:\n%s", table, plans.text())
				}
				text := plans.text()
				assert.Empty(t, seqScan.FindAllString(text, -1), "sequential scans in the plans:\n%s", text)
				assert.Contains(t, text, tc.want, "the index the plans use")
			})
		}
	}
}

var seqScan = regexp.MustCompile(`Seq Scan on (events|deliveries|time_marks|cursors|dead_letters)\b`)

// rowsRead runs sql in a transaction of its own and returns how many rows
// of each of Rheo's tables it read, by sequential scan or through an
// index. The transaction is rolled back.
func rowsRead(ctx context.Context, conn *pgx.Conn, sql string) (map[string]int64, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	counts := func() (map[string]int64, error) {
		rows, _ := tx.Query(ctx, `
			SELECT relname, coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
			  FROM pg_stat_xact_user_tables WHERE schemaname = 'rheo'`)
		out := map[string]int64{}
		var name string
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&name, &n}, func() error { out[name] = n; return nil })
		return out, err
	}
	before, err := counts()
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		return nil, fmt.Errorf("%s: %w", sql, err)
	}
	after, err := counts()
	if err != nil {
		return nil, err
	}
	for table := range after {
		after[table] -= before[table]
	}
	return after, nil
}

// planConn connects to the installed test database with a notice
// handler that records the plans auto_explain reports; the connection
// closes with the test.
func planConn(ctx context.Context, t *testing.T) (*pgx.Conn, *planLog) {
	t.Helper()
	plans := &planLog{}
	cfg, err := pgx.ParseConfig(pgtapInstalledDatabase(t))
	require.NoError(t, err)
	cfg.OnNotice = plans.record
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.WithoutCancel(ctx)) })
	return conn, plans
}

// planLog keeps the plans auto_explain sends as LOG messages.
type planLog struct {
	mu    sync.Mutex
	plans []string
}

func (l *planLog) record(_ *pgconn.PgConn, n *pgconn.Notice) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.plans = append(l.plans, n.Message)
}

func (l *planLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.plans = nil
}

func (l *planLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.plans, "\n")
}

// TestOrderingIndexPaths checks that a 'key' fetch costs what it
// returns, not the events blocked behind a key: with 100,000 events of one
// hot key blocked behind its lease in flight, a fetch of the other keys,
// and the fetch that releases the hot key's next event once its earliest
// is acked, read by index a number of rows bounded by max_count, and
// never the blocked backlog nor the log.
func TestOrderingIndexPaths(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: builds a backlog of 100,000 blocked events")
	}
	ctx, cancel := context.WithTimeout(context.Background(), concTimeout)
	defer cancel()
	conn, plans := planConn(ctx, t)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := conn.Exec(ctx, sql, args...)
		require.NoError(t, err, "%s", sql)
	}

	const (
		blocked  = 100_000
		cold     = 2_000 // per partition, each of its own key
		maxCount = 10
	)
	exec(`SET rheo.notify = 'off'`)
	exec(`SELECT rheo.create_stream('keyed', 2)`)
	exec(`SELECT rheo.create_group('keyed', 'ordered', ordering => 'key')`)
	for first := 0; first <= blocked; first += 10_000 {
		exec(`SELECT count(*) FROM rheo.append_batch('keyed',
			(SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(0, 9999) n),
			keys => array_fill('hot'::text, ARRAY[10000]), "partition" => 0)`)
	}
	// The hot key's first event is leased, and the cursor passes the
	// rest, which are stored as blocked.
	var hotLease string
	require.NoError(t, conn.QueryRow(ctx, `SELECT lease_id::text FROM rheo.fetch('keyed', 'ordered', max_count => 1,
		partitions => '{0}', lease_ms => 3600000, clock => '2030-01-01 00:00Z')`).Scan(&hotLease))
	for {
		var behind int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT high_watermark - next_sequence + 1 FROM rheo.cursors c
			JOIN rheo.partitions pt ON pt.stream = 'keyed' AND pt."partition" = c."partition"
			WHERE c."partition" = 0`).Scan(&behind))
		if behind == 0 {
			break
		}
		exec(`SELECT count(*) FROM rheo.fetch('keyed', 'ordered', max_count => 10000, partitions => '{0}',
			clock => '2030-01-01 00:00Z')`)
	}
	var nBlocked int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM rheo.deliveries WHERE state = 'blocked'`).Scan(&nBlocked))
	require.GreaterOrEqual(t, nBlocked, int64(blocked), "events blocked")
	for p := range 2 {
		exec(`SELECT count(*) FROM rheo.append_batch('keyed',
			(SELECT jsonb_agg(jsonb_build_object('n', n)) FROM generate_series(1, $1::int) n),
			keys => (SELECT array_agg('cold-' || $2::int || '-' || n) FROM generate_series(1, $1::int) n),
			"partition" => $2)`, cold, p)
	}
	exec(`LOAD 'auto_explain'`)
	exec(`SET auto_explain.log_min_duration = 0`)
	exec(`SET auto_explain.log_nested_statements = on`)
	exec(`SET client_min_messages = log`)

	fetch := fmt.Sprintf(`SELECT count(*) FROM rheo.fetch('keyed', 'ordered', max_count => %d,
		clock => '2030-01-01 00:01Z')`, maxCount)
	for round, stats := range []string{"without statistics", "with statistics"} {
		if round == 1 {
			exec(`VACUUM ANALYZE rheo.events, rheo.deliveries, rheo.key_wakeups`)
		}
		for _, tc := range []struct {
			name   string
			ackHot bool // ack the hot key's lease first, outside the measured transaction
		}{
			{"fetch of other keys with the hot key's backlog blocked", false},
			{"fetch that releases the hot key's next event", true},
		} {
			// The ack is made here, not in the subtest, so that a -run
			// pattern that leaves the subtest out leaves the state the
			// next steps expect.
			if tc.ackHot {
				exec(`SELECT rheo.ack($1)`, hotLease)
			}
			t.Run(stats+"/"+tc.name, func(t *testing.T) {
				plans.reset()
				read, err := rowsRead(ctx, conn, fetch)
				require.NoError(t, err)
				// Per partition: the events up to twice max_count, each
				// probing its key's deliveries once, and the due ones.
				for table, limit := range map[string]int64{"events": 2 * 2 * maxCount, "deliveries": 2*2*maxCount + 16} {
					assert.LessOrEqual(t, read[table], limit, "rows read of rheo.%s; plans:\n%s", table, plans.text())
				}
				text := plans.text()
				assert.Empty(t, seqScan.FindAllString(text, -1), "sequential scans in the plans:\n%s", text)
				assert.Contains(t, text, "deliveries_key_idx", "the index the plans use")
			})
		}
		// The released event is leased for good, to be acked in the
		// second round.
		if round == 0 {
			var key string
			var seq int64
			require.NoError(t, conn.QueryRow(ctx, `SELECT lease_id::text, key, sequence FROM rheo.fetch('keyed', 'ordered', max_count => 1,
				partitions => '{0}', lease_ms => 3600000, clock => '2030-01-01 00:01Z')`).Scan(&hotLease, &key, &seq))
			require.Equal(t, "hot", key, "after the ack of the hot key's first event, fetch leases its second")
			require.Equal(t, int64(2), seq, "after the ack of the hot key's first event, fetch leases its second")
		}
	}
}
