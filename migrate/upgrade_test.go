package migrate_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/migrate"
)

// The releases whose schema testdata/releases keeps, as their
// `rheo-migrate sql` printed it: the first one, and the ones before this
// build.
var releases = []string{"54ed27f", "d3e0cd0", "376d670"}

// releaseSchema reads the install script of a release from
// testdata/releases, where it is kept gzipped: a frozen output of that
// release's build, byte for byte, not a source of this one.
func releaseSchema(t *testing.T, release string) []byte {
	t.Helper()
	f, err := os.Open("testdata/releases/" + release + ".sql.gz")
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err, "%s", f.Name())
	script, err := io.ReadAll(zr)
	require.NoError(t, err, "%s", f.Name())
	return script
}

// upgradeEvents is how many events the log holds when the upgrade starts
// (RHEO_TEST_UPGRADE_EVENTS sets another number; BENCHMARKS.md has the
// figures of 1,000,000).
func upgradeEvents(t *testing.T) int {
	if s := os.Getenv("RHEO_TEST_UPGRADE_EVENTS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "RHEO_TEST_UPGRADE_EVENTS")
		return n
	}
	if testing.Short() {
		return 10_000
	}
	return 100_000
}

// upgradeStallBound is the longest call of the older build's workload
// the test accepts while the upgrade runs. The goal is 100 ms
// (BENCHMARKS.md, "Upgrades", has the figures); CI's machines are shared,
// so the test allows more (RHEO_TEST_UPGRADE_STALL sets it).
func upgradeStallBound(t *testing.T) time.Duration {
	if s := os.Getenv("RHEO_TEST_UPGRADE_STALL"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "RHEO_TEST_UPGRADE_STALL")
		return d
	}
	return time.Second
}

// TestUpgradeUnderLoad installs each release's schema from its fixture,
// fills the log, runs a producer and two workers that call the functions
// as that release's Go driver did (named arguments, its signatures; a
// worker's effect and its ack in one transaction), and runs this build's
// migrate.Postgres while they run. Neither side may see an error or the
// migration a warning; every event is handled exactly once; no call of
// the workload waits longer than the stall bound; the database ends as a
// fresh install of this build, the time marks as the log says, and the
// application's role with the access it had, through Rheo's roles.
func TestUpgradeUnderLoad(t *testing.T) {
	for _, release := range releases {
		t.Run("from "+release, func(t *testing.T) {
			upgradeUnderLoad(t, release)
		})
	}
}

func upgradeUnderLoad(t *testing.T, release string) {
	ctx := context.Background()
	fixture := releaseSchema(t, release)
	// The application's role owns its database. The first release had no
	// roles: the application installed Rheo as itself. Later ones: a
	// superuser installs it and grants the application rheo_admin.
	app := testdb.NewRole(t, "")
	adminURL := testdb.NewDatabase(t)
	admin := connect(t, adminURL)
	exec(t, admin, "ALTER DATABASE "+pgx.Identifier{admin.Config().Database}.Sanitize()+" OWNER TO "+pgx.Identifier{app}.Sanitize())
	appURL := testdb.AsRole(t, adminURL, app)
	installer := admin
	if release == "54ed27f" {
		installer = connect(t, appURL)
	}
	require.NoError(t, pgx.BeginFunc(ctx, installer, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, string(fixture))
		return err
	}), "install release %s", release)
	if release != "54ed27f" {
		exec(t, admin, "GRANT rheo_admin TO "+pgx.Identifier{app}.Sanitize())
	}

	pool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	appExec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, "%s", sql)
	}
	appExec(`CREATE TABLE effects (event_id text PRIMARY KEY)`)
	appExec(`SELECT rheo.create_stream(stream => 'orders', partition_count => 4)`)
	appExec(`SELECT rheo.create_group(stream => 'orders', group_name => 'workers', max_attempts => 5)`)

	// The log, of which the workers have handled all but the last events.
	n := upgradeEvents(t)
	const batch = 1000
	for i := 0; i < n; i += batch {
		payloads := make([]map[string]any, 0, batch)
		keys := make([]string, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			payloads = append(payloads, map[string]any{"type": "seeded", "n": j})
			keys = append(keys, "k"+strconv.Itoa(j%97))
		}
		body, _ := json.Marshal(payloads)
		appExec(`SELECT count(*) FROM rheo.append_batch(stream => $1, payloads => $2, keys => $3)`, "orders", string(body), keys)
	}
	const unhandled = 2000
	for handled := 0; handled < n-unhandled; {
		var leases []string
		rows, err := pool.Query(ctx, `SELECT f.lease_id::text FROM rheo.fetch(stream => $1, group_name => $2, max_count => $3,
       consumer_id => $4, lease_ms => $5) AS f`, "orders", "workers", min(1000, n-unhandled-handled), "seed", 30000)
		if err == nil {
			leases, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		require.NoError(t, err)
		appExec(`SELECT count(*) FROM rheo.ack_batch(lease_ids => $1::uuid[])`, leases)
		handled += len(leases)
	}

	w := &workload{pool: pool}
	w.start(ctx)

	var logs warnings
	if os.Getenv("RHEO_TEST_UPGRADE_LOG") == "1" {
		logs.debug = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	// The longest calls without an upgrade, over as long as the upgrade
	// took from the first release with this log, give the machine's own
	// stalls to compare with.
	w.measure.Store(true)
	time.Sleep(baselineWindow(n))
	w.measure.Store(false)
	var baseline [3]time.Duration
	for i := range w.stall {
		baseline[i] = time.Duration(w.stall[i].Swap(0))
	}
	w.mu.Lock()
	w.slow = nil
	w.mu.Unlock()
	w.measure.Store(true)
	upgradeStart := time.Now()
	migrator := connect(t, adminURL)
	var trace *tracer
	if logs.debug != nil {
		trace = startTrace(t, adminURL, migrator.PgConn().PID())
	}
	assert.NoError(t, migrate.Postgres(ctx, migrator, &migrate.Options{Logger: slog.New(&logs)}), "upgrade")
	upgradeTook := time.Since(upgradeStart)
	if trace != nil {
		trace.report(t, w.slowCalls())
	}
	time.Sleep(200 * time.Millisecond)
	w.measure.Store(false)
	w.stopProducing()
	total := int64(n) + w.appended.Load()
	w.drain(t, total)

	t.Logf("upgrade from %s with %d events: %s; %d events appended meanwhile; longest call: append %s, fetch %s, settle %s "+
		"(without an upgrade, over %s: %s, %s, %s)",
		release, n, upgradeTook.Round(time.Millisecond), w.appended.Load(),
		time.Duration(w.stall[0].Load()), time.Duration(w.stall[1].Load()), time.Duration(w.stall[2].Load()),
		baselineWindow(n), baseline[0], baseline[1], baseline[2])
	assert.Empty(t, w.errs(), "workload")
	assert.Empty(t, logs.list(), "upgrade logged")
	bound := upgradeStallBound(t)
	assert.LessOrEqual(t, time.Duration(w.maxStall()), bound, "a call of the workload waited %s during the upgrade, more than %s", time.Duration(w.maxStall()), bound)

	// Every event handled once: the events the workers were left with,
	// and those appended during the test.
	var events, effects int64
	assert.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rheo.stream_info('orders')`).Scan(new(int64)), "the application cannot call stream_info after the upgrade")
	require.NoError(t, admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM rheo.events), (SELECT count(*) FROM effects)`).Scan(&events, &effects))
	assert.Equal(t, total, events, "events %d, effects %d; want %d events and %d effects", events, effects, total, total-int64(n)+unhandled)
	assert.Equal(t, total-int64(n)+unhandled, effects, "events %d, effects %d; want %d events and %d effects", events, effects, total, total-int64(n)+unhandled)

	// This build's calls work for the application.
	appExec(`SELECT rheo.create_group(stream => 'orders', group_name => 'keyed', ordering => 'key')`)
	var ordering string
	err = pool.QueryRow(ctx, `SELECT g.ordering FROM rheo.list_groups('orders') AS g WHERE g.group_name = 'keyed'`).Scan(&ordering)
	assert.NoError(t, err, "list_groups after the upgrade: ordering %q, %v", ordering, err)
	assert.Equal(t, "key", ordering, "list_groups after the upgrade: ordering %q, %v", ordering, err)

	checkTimeMarks(t, admin)
	checkAccess(t, admin, app)
	fresh := connect(t, testdb.NewDatabase(t))
	require.NoError(t, migrate.Postgres(ctx, fresh, nil))
	got, want := schemaOf(t, admin), schemaOf(t, fresh)
	assert.Equal(t, want, got, "the upgraded schema differs from a fresh install's:\nupgraded:\n%s\nfresh:\n%s", got, want)
}

// TestUpgradeKeepsCallsInFlight installs the first release, whose
// functions ran with the caller's privileges, as the application's role
// and upgrades it while a transaction older than the switch stays open,
// so that the follow-ups wait: until they run, the application may still
// call the helpers the previous release's calls in flight use, and once
// they have run it may not.
func TestUpgradeKeepsCallsInFlight(t *testing.T) {
	ctx := context.Background()
	app := testdb.NewRole(t, "")
	adminURL := testdb.NewDatabase(t)
	admin := connect(t, adminURL)
	exec(t, admin, "ALTER DATABASE "+pgx.Identifier{admin.Config().Database}.Sanitize()+" OWNER TO "+pgx.Identifier{app}.Sanitize())
	appURL := testdb.AsRole(t, adminURL, app)
	exec(t, connect(t, appURL), "BEGIN; "+string(releaseSchema(t, "54ed27f"))+"; COMMIT")

	older := connect(t, adminURL)
	exec(t, older, "BEGIN; SELECT 1")
	var logs warnings
	require.NoError(t, migrate.Postgres(ctx, connect(t, adminURL), &migrate.Options{Logger: slog.New(&logs), Wait: 100 * time.Millisecond}))
	assert.Empty(t, logs.list(), "upgrade logged")
	left, err := migrate.PostgresFollowUps(ctx, admin)
	require.NoError(t, err)
	require.NotZero(t, left, "follow-ups left while a transaction older than the switch is open")

	caller := connect(t, appURL)
	helper := `SELECT rheo._partitions(NULL, 4)`
	_, err = caller.Exec(ctx, helper)
	assert.NoError(t, err, "the previous release's helper, called with the application's privileges before the follow-ups")

	exec(t, older, "ROLLBACK")
	require.NoError(t, migrate.Postgres(ctx, connect(t, adminURL), &migrate.Options{Logger: slog.New(&logs)}))
	_, err = caller.Exec(ctx, helper)
	var pgErr *pgconn.PgError
	if assert.ErrorAs(t, err, &pgErr, "the helper after the follow-ups") {
		assert.Equal(t, "42501", pgErr.Code, "the helper after the follow-ups: %v", err)
	}
	checkAccess(t, admin, app)
}

// baselineWindow is how long the workload runs before the upgrade, its
// longest calls measured: about as long as an upgrade from the first
// release takes with n events.
func baselineWindow(n int) time.Duration {
	return time.Second + time.Duration(n/100_000)*time.Second
}

// workload runs a producer and two workers as the older build's driver
// called the functions, and records their errors and longest calls.
type workload struct {
	pool     *pgxpool.Pool
	measure  atomic.Bool     // record the longest calls
	stall    [3]atomic.Int64 // append, fetch, settle: the longest call, in ns
	appended atomic.Int64
	stop     chan struct{}
	done     chan struct{}
	workers  sync.WaitGroup
	quit     chan struct{}
	mu       sync.Mutex
	failures []error
	slow     []slowCall // calls longer than 50 ms while measuring
}

// slowCall is a call of the workload that took long.
type slowCall struct {
	op    string
	start time.Time
	took  time.Duration
}

func (w *workload) slowCalls() []slowCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.slow
}

// tracer samples what the migration's session runs, every few
// milliseconds, so that the slow calls can be put beside it
// (RHEO_TEST_UPGRADE_LOG=1).
type tracer struct {
	mu      sync.Mutex
	samples []traceSample
	stop    chan struct{}
	done    chan struct{}
}

type traceSample struct {
	at    time.Time
	query string
}

func startTrace(t *testing.T, url string, pid uint32) *tracer {
	conn := connect(t, url)
	tr := &tracer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for {
			select {
			case <-tr.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			var q string
			if err := conn.QueryRow(context.Background(), `SELECT state || ' ' || left(regexp_replace(query, '\s+', ' ', 'g'), 120)
  FROM pg_stat_activity WHERE pid = $1`, int(pid)).Scan(&q); err != nil {
				return
			}
			tr.mu.Lock()
			if n := len(tr.samples); n == 0 || tr.samples[n-1].query != q {
				tr.samples = append(tr.samples, traceSample{time.Now(), q})
			}
			tr.mu.Unlock()
		}
	}()
	return tr
}

// report logs each slow call with what the migration ran meanwhile.
func (tr *tracer) report(t *testing.T, slow []slowCall) {
	close(tr.stop)
	<-tr.done
	for _, c := range slow {
		t.Logf("%s took %s:", c.op, c.took.Round(time.Millisecond))
		for i, s := range tr.samples {
			end := time.Now()
			if i+1 < len(tr.samples) {
				end = tr.samples[i+1].at
			}
			if end.After(c.start) && s.at.Before(c.start.Add(c.took)) {
				t.Logf("    %6s %s", end.Sub(s.at).Round(time.Millisecond), s.query)
			}
		}
	}
}

func (w *workload) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.failures) < 20 {
		w.failures = append(w.failures, err)
	}
}

func (w *workload) errs() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failures
}

func (w *workload) took(i int, start time.Time) {
	if !w.measure.Load() {
		return
	}
	d := int64(time.Since(start))
	if time.Duration(d) > 50*time.Millisecond {
		w.mu.Lock()
		w.slow = append(w.slow, slowCall{op: [...]string{"append", "fetch", "settle"}[i], start: start, took: time.Duration(d)})
		w.mu.Unlock()
	}
	for {
		old := w.stall[i].Load()
		if d <= old || w.stall[i].CompareAndSwap(old, d) {
			return
		}
	}
}

func (w *workload) maxStall() int64 {
	return max(w.stall[0].Load(), w.stall[1].Load(), w.stall[2].Load())
}

func (w *workload) start(ctx context.Context) {
	w.stop, w.done, w.quit = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			start := time.Now()
			_, err := w.pool.Exec(ctx, `SELECT e.sequence FROM rheo.append(stream => $1, payload => $2, key => $3, id => $4) AS e`,
				"orders", `{"type": "placed"}`, "k"+strconv.Itoa(i%97), "p-"+strconv.Itoa(i))
			w.took(0, start)
			if err != nil {
				w.fail(fmt.Errorf("append: %w", err))
				time.Sleep(10 * time.Millisecond)
				continue
			}
			w.appended.Add(1)
			time.Sleep(time.Millisecond)
		}
	}()
	for c := range 2 {
		w.workers.Go(func() { w.work(ctx, "worker-"+strconv.Itoa(c)) })
	}
}

// work fetches and handles leases: the effect and the ack in one
// transaction, as a TxHandler does.
func (w *workload) work(ctx context.Context, consumer string) {
	for {
		select {
		case <-w.quit:
			return
		default:
		}
		start := time.Now()
		rows, err := w.pool.Query(ctx, `SELECT f.lease_id, f.event_id FROM rheo.fetch(stream => $1, group_name => $2, max_count => $3,
       consumer_id => $4, lease_ms => $5) AS f`, "orders", "workers", 10, consumer, 30000)
		type lease struct {
			LeaseID string
			EventID string
		}
		var leases []lease
		if err == nil {
			leases, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease, error) {
				var l lease
				return l, row.Scan(&l.LeaseID, &l.EventID)
			})
		}
		w.took(1, start)
		if err != nil {
			w.fail(fmt.Errorf("fetch: %w", err))
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if len(leases) == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		for _, l := range leases {
			start := time.Now()
			err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO effects (event_id) VALUES ($1)`, l.EventID); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `SELECT rheo.ack(lease_id => $1::uuid)`, l.LeaseID)
				return err
			})
			w.took(2, start)
			if err != nil {
				w.fail(fmt.Errorf("settle %s: %w", l.EventID, err))
			}
		}
	}
}

func (w *workload) stopProducing() {
	close(w.stop)
	<-w.done
}

// drain waits for the workers to handle every event, then stops them.
func (w *workload) drain(t *testing.T, total int64) {
	t.Helper()
	defer func() {
		close(w.quit)
		w.workers.Wait()
	}()
	// A bound for a stuck drain, not a budget: a loaded machine takes
	// its time.
	deadline := time.Now().Add(4 * time.Minute)
	for time.Now().Before(deadline) {
		var pending, inflight int64
		require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT g.lag, g.inflight FROM rheo.group_info(stream => 'orders', group_name => 'workers') AS g`).Scan(&pending, &inflight))
		if pending == 0 && inflight == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	assert.Fail(t, "the workers did not handle the events within four minutes", "%d events", total)
}

// checkTimeMarks compares the time marks and the partitions' running
// maximum and tail with what the log says.
func checkTimeMarks(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	var wrongMarks, wrongTails int
	err := conn.QueryRow(context.Background(), `
WITH want AS (
    SELECT r.stream, r."partition", r.sequence, r.max_ts, r.min_ts
      FROM (SELECT e.stream, e."partition", e.sequence,
                   max(e.ts) OVER (PARTITION BY e.stream, e."partition" ORDER BY e.sequence) AS max_ts,
                   min(e.ts) OVER (PARTITION BY e.stream, e."partition", (e.sequence - 1) / 1024) AS min_ts
              FROM rheo.events e) AS r
     WHERE r.sequence % 1024 = 0
), got AS (SELECT stream, "partition", sequence, max_ts, min_ts FROM rheo.time_marks)
SELECT (SELECT count(*) FROM ((SELECT * FROM want EXCEPT SELECT * FROM got) UNION ALL (SELECT * FROM got EXCEPT SELECT * FROM want)) d),
       (SELECT count(*) FROM rheo.partitions pt
         WHERE pt.max_ts IS DISTINCT FROM (SELECT max(e.ts) FROM rheo.events e WHERE e.stream = pt.stream AND e."partition" = pt."partition")
            OR pt.tail_min_ts IS DISTINCT FROM (SELECT min(e.ts) FROM rheo.events e
                                                 WHERE e.stream = pt.stream AND e."partition" = pt."partition"
                                                   AND e.sequence > pt.high_watermark / 1024 * 1024))`).Scan(&wrongMarks, &wrongTails)
	require.NoError(t, err)
	assert.Zero(t, wrongMarks, "%d time marks and %d partitions' tails differ from the log", wrongMarks, wrongTails)
	assert.Zero(t, wrongTails, "%d time marks and %d partitions' tails differ from the log", wrongMarks, wrongTails)
}

// checkAccess checks that the application's role reaches Rheo through
// rheo_admin alone, its temporary privileges gone with the follow-ups.
func checkAccess(t *testing.T, conn *pgx.Conn, app string) {
	t.Helper()
	var admin, direct, routines, followUps bool
	require.NoError(t, conn.QueryRow(context.Background(), `
SELECT pg_has_role($1, 'rheo_admin', 'MEMBER'),
       EXISTS (SELECT FROM pg_class c, aclexplode(c.relacl) a
                WHERE c.relnamespace = 'rheo'::regnamespace AND a.grantee = $1::regrole),
       EXISTS (SELECT FROM pg_proc p, aclexplode(p.proacl) a
                WHERE p.pronamespace = 'rheo'::regnamespace AND a.grantee = $1::regrole),
       to_regclass('rheo.upgrade_follow_ups') IS NOT NULL`, app).Scan(&admin, &direct, &routines, &followUps))
	state := fmt.Sprintf("after the upgrade: %s member of rheo_admin %v, holds privileges on Rheo's tables %v, on its routines %v; follow-ups left %v",
		app, admin, direct, routines, followUps)
	assert.True(t, admin, state)
	assert.False(t, direct, state)
	assert.False(t, routines, state)
	assert.False(t, followUps, state)
}

// schemaOf describes what a migration makes: tables and their columns,
// constraints, indexes, triggers, storage parameters and the functions.
func schemaOf(t *testing.T, conn *pgx.Conn) string {
	t.Helper()
	var s string
	err := conn.QueryRow(context.Background(), `
SELECT string_agg(line, E'\n' ORDER BY line) FROM (
    SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
           || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
           || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
           || coalesce(' ' || (SELECT array_agg(o ORDER BY o) FROM unnest(a.attoptions) AS o WHERE o NOT LIKE 'pg\_attver=%')::text, '')
           || ' #' || a.attnum AS line
      FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
     WHERE c.relnamespace = 'rheo'::regnamespace AND c.relkind IN ('r', 'v', 'c')
    UNION ALL
    SELECT 'constraint ' || c.conrelid::regclass::text || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
           || CASE WHEN c.convalidated THEN '' ELSE ' not valid' END
      FROM pg_constraint c WHERE c.connamespace = 'rheo'::regnamespace
    UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid) || CASE WHEN i.indisvalid THEN '' ELSE ' invalid' END
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = 'rheo'::regnamespace
    UNION ALL
    SELECT 'trigger ' || pg_get_triggerdef(g.oid)
      FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid WHERE c.relnamespace = 'rheo'::regnamespace AND NOT g.tgisinternal
    UNION ALL
    SELECT 'relation ' || c.relname || ' ' || c.relkind::text || ' ' || c.relowner::regrole::text || coalesce(' ' || c.reloptions::text, '')
      FROM pg_class c WHERE c.relnamespace = 'rheo'::regnamespace
    UNION ALL
    SELECT 'function ' || p.oid::regprocedure::text || ' ' || p.proowner::regrole::text || ' ' || md5(pg_get_functiondef(p.oid))
           || ' ' || coalesce(p.proacl::text, '')
      FROM pg_proc p WHERE p.pronamespace = 'rheo'::regnamespace
    UNION ALL
    SELECT 'schema ' || n.nspowner::regrole::text || ' ' || coalesce(n.nspacl::text, '')
      FROM pg_namespace n WHERE n.nspname = 'rheo'
    UNION ALL
    SELECT 'version ' || v.version FROM rheo.schema_version v
) l`).Scan(&s)
	require.NoError(t, err)
	return s
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err, "connect")
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(context.Background())) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	_, err := conn.Exec(context.Background(), sql)
	require.NoError(t, err, "%s", sql)
}

// warnings is a slog handler that keeps the records at Warn and above.
type warnings struct {
	mu    sync.Mutex
	msgs  []string
	debug slog.Handler // with RHEO_TEST_UPGRADE_LOG=1, every record goes to stderr
}

func (h *warnings) Enabled(_ context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.debug != nil
}

func (h *warnings) Handle(_ context.Context, r slog.Record) error {
	if h.debug != nil {
		h.debug.Handle(context.Background(), r)
	}
	if r.Level < slog.LevelWarn {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}

func (h *warnings) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *warnings) WithGroup(string) slog.Handler      { return h }

func (h *warnings) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.msgs
}
