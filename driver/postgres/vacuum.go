package postgres

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultVacuumEvery is the default of Options.VacuumEvery.
const DefaultVacuumEvery = 20_000

// vacuumSQL reclaims the rows that settles left dead in rheo.deliveries.
// SKIP_LOCKED: a VACUUM of the table already running elsewhere does the
// same work, so this one is skipped rather than queued behind it.
// TRUNCATE false: giving empty pages back to the file system needs a
// moment of exclusive lock that fetches and settles would wait for; the
// pages stay in the table's free space map and the next fetches fill
// them, so the table keeps the size of the work done between two runs.
const vacuumSQL = `VACUUM (SKIP_LOCKED, TRUNCATE false, PROCESS_TOAST false) rheo.deliveries`

// mayVacuumSQL tells whether the current role may VACUUM rheo.deliveries:
// a superuser, the table's owner or the database's owner (or a member of
// either), or on PostgreSQL 17 a holder of the MAINTAIN privilege, which
// Rheo grants rheo_consumer there. Any other role's VACUUM is skipped
// with a warning rather than failing.
const mayVacuumSQL = `SELECT r.rolsuper
       OR pg_has_role(c.relowner, 'USAGE')
       OR pg_has_role(d.datdba, 'USAGE')
       OR current_setting('server_version_num')::int >= 170000 AND has_table_privilege(c.oid, 'MAINTAIN')
  FROM pg_roles r, pg_class c, pg_database d
 WHERE r.rolname = current_user AND c.oid = 'rheo.deliveries'::regclass AND d.datname = current_database()`

// vacuumer keeps rheo.deliveries small while the driver settles
// deliveries. Every settle leaves a dead row there (an ack deletes its
// row, a retry or reject rewrites or deletes it), and PostgreSQL reuses
// that space, in the table and in its indexes, only after a VACUUM.
// Autovacuum visits a database at most once per autovacuum_naptime (a
// minute by default), which at tens of thousands of settles a second lets
// the table and its lease_id index grow by hundreds of megabytes. So after
// every `every` settles the driver runs a VACUUM of that one table in the
// background, one at a time; at that rate each run has little to do.
//
// An application role granted only rheo_consumer may not VACUUM (before
// PostgreSQL 17): the first run finds that out, says so once, and the
// vacuumer stops, leaving the table to autovacuum.
type vacuumer struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	every  int64

	settled atomic.Int64 // settles since the last run began
	running atomic.Bool
	refused atomic.Bool // the role may not VACUUM the table

	mu     sync.Mutex // guards closed and runs.Add against close
	closed bool
	runs   sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// newVacuumer returns a vacuumer that runs after every settles, or nil
// when every is negative.
func newVacuumer(pool *pgxpool.Pool, logger *slog.Logger, every int) *vacuumer {
	if every < 0 {
		return nil
	}
	if every == 0 {
		every = DefaultVacuumEvery
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &vacuumer{pool: pool, logger: logger, every: int64(every), ctx: ctx, cancel: cancel}
}

// settledRows counts n settled deliveries and starts a VACUUM when enough
// have gathered and none is running.
func (v *vacuumer) settledRows(n int) {
	if v == nil || n <= 0 || v.refused.Load() || v.settled.Add(int64(n)) < v.every {
		return
	}
	if !v.running.CompareAndSwap(false, true) {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		v.running.Store(false)
		return
	}
	v.settled.Store(0)
	v.runs.Add(1)
	go v.run()
}

func (v *vacuumer) run() {
	defer v.runs.Done()
	defer v.running.Store(false)
	var may bool
	err := v.pool.QueryRow(v.ctx, mayVacuumSQL).Scan(&may)
	if err == nil && !may {
		v.refused.Store(true)
		v.logger.InfoContext(v.ctx, "rheo: this role may not VACUUM rheo.deliveries, which is left to autovacuum; "+
			"see the driver's VacuumEvery option")
		return
	}
	if err == nil {
		_, err = v.pool.Exec(v.ctx, vacuumSQL)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		v.logger.WarnContext(v.ctx, "rheo: vacuum of rheo.deliveries failed", "error", err)
	}
}

// close cancels a run in progress and waits for it.
func (v *vacuumer) close() {
	if v == nil {
		return
	}
	v.mu.Lock()
	v.closed = true
	v.mu.Unlock()
	v.cancel()
	v.runs.Wait()
}
