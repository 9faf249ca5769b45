package migrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	rheosql "github.com/rheo-go/rheo/sql"
)

// Postgres brings the database behind conn up to date while the
// application runs, under the session advisory lock AdvisoryLockKey, so
// concurrent runs wait for each other:
//
//  1. CREATE SCHEMA IF NOT EXISTS rheo and Rheo's roles (Roles, or with
//     Options.RolePrefix the names RoleNamesFor gives, below called by
//     their default names), created when missing if the current role
//     may create roles, and the prefix, recorded in a new install (a run
//     with a prefix other than the install's is refused); otherwise a
//     Warn record says what is left undone and the install goes on
//     without them (see PostgresRoles);
//  2. the steps of the pending schema migrations (rheosql.Schema) that
//     the previous release's functions can live with, each in a short
//     transaction of its own (index builds CONCURRENTLY, outside one;
//     backfills in batches);
//  3. the switch, one transaction with the tables it changes locked at
//     its start: the migrations' switch steps, the hand-over of the
//     schema and everything in it to rheo_owner (an application role
//     that used Rheo before it belonged to rheo_owner is granted the
//     Rheo roles that give it the same access), the functions
//     (rheosql.Functions, all files in lexical order, created as
//     rheo_owner; skipped when the sha256 of the files equals the one
//     recorded in rheo.function_set, no migration is pending and the
//     roles have their privileges) and the new version in
//     rheo.schema_version;
//  4. the follow-ups, once the transactions that began before the switch
//     have ended: what the previous release's calls in flight might still
//     use (its functions' old signatures, temporary privileges) is
//     dropped. They wait at most Options.Wait; what is left runs at the
//     next run.
//
// Every wait for a lock that stops the application is bounded by
// Options.LockTimeout, and a step that gives up is tried again, up to
// Options.Attempts times: Postgres never deadlocks the application and
// never queues it behind a long transaction. docs/upgrading.md says what
// each release's steps lock and for how long.
//
// A second run changes nothing. The current role must be a superuser, a
// member of rheo_owner, or have CREATEROLE, in which case it is a member
// of rheo_owner within each of the run's transactions only; any other
// role installs Rheo as its own (step 1's Warn record). conn must be a
// session of its own (not in a transaction, not behind a
// transaction-pooling proxy, which would lose the session lock); its
// session settings are reset (RESET ALL) when the run ends, and the lock
// is released whatever happened (the connection is closed when it cannot
// be). opts may be nil.
//
// Errors wrap rheo.ErrBackendUnavailable when the connection broke, and
// are *rheo.FailedError otherwise. Each step is atomic or idempotent, so
// running Postgres again after an error is safe.
func Postgres(ctx context.Context, conn *pgx.Conn, opts *Options) (err error) {
	names, err := opts.roleNames()
	if err != nil {
		return err
	}
	r := &runner{ctx: ctx, conn: conn, opts: opts, log: opts.logger(), names: names}
	if err := r.lock(); err != nil {
		return r.fail("take the migration lock", err)
	}
	defer func() {
		if uerr := r.release(); err == nil && uerr != nil {
			err = r.fail("release the migration lock", uerr)
		}
	}()
	return r.run()
}

// runner is one run of Postgres.
type runner struct {
	ctx   context.Context
	conn  *pgx.Conn
	opts  *Options
	log   *slog.Logger
	in    installer
	names RoleNames // the run's roles (Options.RolePrefix)
}

// lock takes the session lock AdvisoryLockKey. It tries, and waits
// between tries, rather than queue for it: a session queued for a lock
// holds a snapshot, which another run's CREATE INDEX CONCURRENTLY would
// wait for while that run holds the lock.
func (r *runner) lock() error {
	for {
		var taken bool
		if err := r.conn.QueryRow(r.ctx, "SELECT pg_try_advisory_lock($1)", AdvisoryLockKey).Scan(&taken); err != nil {
			return err
		}
		if taken {
			return nil
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-r.ctx.Done():
			return r.ctx.Err()
		}
	}
}

func (r *runner) fail(step string, err error) error {
	return wrapErr(r.ctx, step, err, r.conn.IsClosed())
}

// release ends the run on the session: a transaction left open is rolled
// back, every hold of the migration lock is released (also one that an
// earlier failed run on this pooled connection left), and the settings
// the run made are reset. When that fails the connection is closed,
// which ends the session and its locks.
func (r *runner) release() error {
	if r.conn.IsClosed() {
		return nil // the session, and its lock, are gone
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 10*time.Second)
	defer cancel()
	err := func() error {
		if r.conn.PgConn().TxStatus() != 'I' {
			if _, err := r.conn.Exec(ctx, "ROLLBACK"); err != nil {
				return err
			}
		}
		for {
			var held bool
			if err := r.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", AdvisoryLockKey).Scan(&held); err != nil {
				return err
			}
			if !held {
				break
			}
		}
		_, err := r.conn.Exec(ctx, "RESET ALL")
		return err
	}()
	if err != nil {
		_ = r.conn.Close(ctx)
	}
	return err
}

func (r *runner) run() error {
	ms, err := loadMigrations()
	if err != nil {
		return r.fail("load schema migrations", err)
	}
	set, err := loadFunctions()
	if err != nil {
		return r.fail("load functions", err)
	}
	latest := int32(len(ms))

	var current int32
	if err := r.tx("prepare", false, func(tx pgx.Tx) error {
		for _, q := range []string{citusRolesSQL, "CREATE SCHEMA IF NOT EXISTS rheo", createRolesSQL} {
			if _, err := tx.Exec(r.ctx, q); err != nil {
				return err
			}
		}
		if err := r.access(tx); err != nil {
			return err
		}
		for _, q := range []string{createVersionTableSQL, createPrefixTableSQL} {
			if _, err := tx.Exec(r.ctx, q); err != nil {
				return err
			}
		}
		return tx.QueryRow(r.ctx, "SELECT version FROM "+versionTable).Scan(&current)
	}); err != nil {
		return err
	}
	if notice := r.in.notice(); notice != "" {
		r.log.WarnContext(r.ctx, notice)
	}
	if current > latest {
		return r.fail("schema migration", newerSchemaError(current, latest))
	}

	// Follow-ups an earlier run left: due before anything else changes.
	if err := r.followUps(); err != nil {
		return err
	}

	// The steps before the switch. A migration that needs no switch is
	// recorded as applied with its last step, as long as no earlier one
	// waits for the switch.
	pending := ms[current:]
	deferred := false
	for _, m := range pending {
		r.log.InfoContext(r.ctx, "applying schema migration", logKeyVersion, m.version, logKeyName, m.name)
		record := !deferred && !m.hasSwitch()
		if err := r.online(m, record); err != nil {
			return err
		}
		deferred = deferred || !record
	}

	if err := r.switchTx(set, pending, latest, current > 0); err != nil {
		return err
	}
	if err := r.followUps(); err != nil {
		return err
	}
	// On a Citus cluster, as the role the run started as: Citus moves
	// the tables' rows as their owner would not be allowed to.
	return r.tx("distribute on Citus", true, func(tx pgx.Tx) error {
		_, err := tx.Exec(r.ctx, rheosql.Citus)
		return err
	})
}

// tx runs fn in a transaction of its own, with the run's role prefix
// set (setPrefixSQL), as a member of the owner role where the current
// role may be one (ownerAccessSQL, ended by ownerReleaseSQL before the
// commit), with the short lock timeout, or
// with Options.Wait for steps that let the application through (long),
// tried again when it gives up on a lock or is a deadlock's victim.
func (r *runner) tx(what string, long bool, fn func(tx pgx.Tx) error) error {
	return r.retry(what, long, func() error {
		return pgx.BeginFunc(r.ctx, r.conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(r.ctx, "SELECT set_config('lock_timeout', $1, true)", r.timeout(long)); err != nil {
				return err
			}
			if _, err := tx.Exec(r.ctx, setPrefixSQL, r.names.prefix()); err != nil {
				return err
			}
			if err := fn(tx); err != nil {
				return err
			}
			_, err := tx.Exec(r.ctx, ownerReleaseSQL)
			return err
		})
	})
}

// access makes the current role able to act as the owner role for the
// transaction, and reads what it may do.
func (r *runner) access(tx pgx.Tx) error {
	if _, err := tx.Exec(r.ctx, ownerAccessSQL); err != nil {
		return err
	}
	in, err := readInstaller(r.ctx, tx, r.names)
	r.in = in
	return err
}

func (r *runner) timeout(long bool) string {
	d := r.opts.lockTimeout()
	if long {
		d = r.opts.wait()
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// retry runs fn until it succeeds, fails for another reason than a lock
// it gave up on or a deadlock, or has been tried Options.Attempts times
// (3 times for a step that waits Options.Wait for its locks: long).
func (r *runner) retry(what string, long bool, fn func() error) error {
	attempts := r.opts.attempts()
	if long {
		attempts = min(attempts, 3)
	}
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if !retryable(err) || attempt >= attempts || r.ctx.Err() != nil {
			if retryable(err) {
				wait := r.opts.lockTimeout()
				if long {
					wait = r.opts.wait()
				}
				err = &giveUpError{tries: attempt, wait: wait, err: err}
			}
			return r.fail(what, err)
		}
		r.log.DebugContext(r.ctx, "step gave up on a lock; trying again", "step", what, "attempt", attempt, "error", err.Error())
		pause := min(time.Duration(attempt)*20*time.Millisecond, time.Second)
		pause = pause/2 + rand.N(pause/2+1)
		select {
		case <-time.After(pause):
		case <-r.ctx.Done():
			return r.fail(what, r.ctx.Err())
		}
	}
}

// giveUpError is a step that gave up on its locks as often as it may.
type giveUpError struct {
	tries int
	wait  time.Duration
	err   error
}

func (e *giveUpError) Error() string {
	msg := e.err.Error()
	var pgErr *pgconn.PgError
	if errors.As(e.err, &pgErr) {
		msg = pgErr.Message
	}
	return fmt.Sprintf("gave up after %d tries, each waiting at most %s for its locks, which a long transaction holds (see pg_stat_activity): %s",
		e.tries, e.wait, msg)
}

func (e *giveUpError) Unwrap() error { return e.err }

// retryable reports whether err is a lock the step gave up on, a
// deadlock it was the victim of, or a serialization failure.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "55P03", "40P01", "40001": // lock_not_available, deadlock_detected, serialization_failure
		return true
	case "XX000":
		// Two runs changing one server-wide catalog row at once, such as
		// the owner role's memberships of installs into two databases of
		// a server (on Citus, also on its workers): the transaction
		// rolled back whole, and runs again once the other has committed.
		return pgErr.Message == "tuple concurrently updated"
	}
	return false
}

// online runs the steps of m that come before the switch; record sets
// the version to m's with its last step.
func (r *runner) online(m migration, record bool) error {
	var steps []step
	for _, s := range m.steps {
		if s.kind != stepSwitch && s.kind != stepInstall && s.kind != stepFollowUp {
			steps = append(steps, s)
		}
	}
	what := fmt.Sprintf("schema migration %s", m.name)
	setVersion := fmt.Sprintf("UPDATE %s SET version = %d", versionTable, m.version)
	for i, s := range steps {
		last := record && i == len(steps)-1
		var err error
		switch s.kind {
		case stepConcurrently:
			err = r.concurrently(what, s.sql)
			if err == nil && last {
				err = r.setVersion(what, setVersion)
			}
		case stepBatch:
			err = r.batch(what, s.sql)
			if err == nil && last {
				err = r.setVersion(what, setVersion)
			}
		default:
			err = r.tx(what, s.kind == stepOnline, func(tx pgx.Tx) error {
				if err := r.access(tx); err != nil {
					return err
				}
				if _, err := tx.Exec(r.ctx, s.sql); err != nil {
					return err
				}
				if last {
					_, err := tx.Exec(r.ctx, setVersion)
					return err
				}
				return nil
			})
		}
		if err != nil {
			return err
		}
	}
	if record && len(steps) == 0 {
		return r.setVersion(what, setVersion)
	}
	return nil
}

// setVersion records a migration as applied, in a transaction of its own.
func (r *runner) setVersion(what, sql string) error {
	return r.tx(what, false, func(tx pgx.Tx) error {
		if err := r.access(tx); err != nil {
			return err
		}
		_, err := tx.Exec(r.ctx, sql)
		return err
	})
}

// batch runs a backfill's statement until it changes no row, each time
// in a transaction of its own.
func (r *runner) batch(what, sql string) error {
	for {
		var n int64
		if err := r.tx(what, false, func(tx pgx.Tx) error {
			if err := r.access(tx); err != nil {
				return err
			}
			tag, err := tx.Exec(r.ctx, sql)
			n = tag.RowsAffected()
			return err
		}); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
}

// concurrently runs a statement that cannot run in a transaction (CREATE
// INDEX CONCURRENTLY), as the owner role when the tables belong to it, after
// dropping the invalid indexes that failed builds left in schema rheo.
func (r *runner) concurrently(what, sql string) error {
	return r.retry(what, true, func() error {
		if _, err := r.conn.Exec(r.ctx, "SELECT set_config('lock_timeout', $1, false), set_config('rheo.role_prefix', $2, false)",
			r.timeout(true), r.names.prefix()); err != nil {
			return err
		}
		defer func() { _, _ = r.conn.Exec(context.WithoutCancel(r.ctx), "RESET lock_timeout; RESET rheo.role_prefix") }()
		var invalid []string
		rows, err := r.conn.Query(r.ctx, `
SELECT c.oid::regclass::text
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE c.relnamespace = 'rheo'::regnamespace AND NOT i.indisvalid`)
		if err != nil {
			return err
		}
		if invalid, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		asOwner, err := r.actAsOwner()
		if err != nil {
			return err
		}
		defer asOwner()
		for _, name := range invalid {
			if _, err := r.conn.Exec(r.ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+name); err != nil {
				return err
			}
		}
		_, err = r.conn.Exec(r.ctx, sql)
		return err
	})
}

// actAsOwner makes the session act as the owner role, outside a transaction,
// when the schema belongs to it and the current role may (a superuser or
// a member stays who it is; a role with CREATEROLE is a member until the
// returned function runs). It returns what undoes it.
func (r *runner) actAsOwner() (func(), error) {
	var owned, member, createRole bool
	if err := r.conn.QueryRow(r.ctx, `
SELECT coalesce((SELECT n.nspowner::regrole::text = $1 FROM pg_namespace n WHERE n.nspname = 'rheo'), false),
       coalesce((SELECT pg_has_role(current_user, o.oid, 'USAGE') FROM pg_roles o WHERE o.rolname = $1), false),
       (SELECT r.rolcreaterole AND NOT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user)`, r.names.Owner).Scan(&owned, &member, &createRole); err != nil {
		return nil, err
	}
	if !owned || member || !createRole {
		return func() {}, nil
	}
	if _, err := r.conn.Exec(r.ctx, "GRANT "+pgx.Identifier{r.names.Owner}.Sanitize()+" TO CURRENT_USER"); err != nil {
		return nil, err
	}
	return func() {
		// A run that dies before this leaves the membership, which the
		// next run's ownerReleaseSQL revokes.
		_, _ = r.conn.Exec(context.WithoutCancel(r.ctx), ownerReleaseSQL)
	}, nil
}

// switchTables are Rheo's tables in the order the switch locks them:
// the order in which an append and then a fetch and a settle take them.
var switchTables = []string{"streams", "stream_locks", "partitions", "events", "time_marks", "groups", "cursors",
	"deliveries", "dead_letters", "key_wakeups"}

// lockAllSQL locks every table of switchTables that exists, in that
// order, in ACCESS EXCLUSIVE mode, within one lock_timeout in all: each
// lock may wait only for what is left of it, so that the tables taken
// first are not held while the later ones are waited for, one timeout
// each.
var lockAllSQL = func() string {
	var tables []string
	for _, t := range switchTables {
		tables = append(tables, "rheo."+t)
	}
	return `DO $rheo_lock$
DECLARE
    v_budget  text := current_setting('lock_timeout');
    v_end     timestamptz := clock_timestamp() + v_budget::interval;
    v_table   text;
BEGIN
    FOREACH v_table IN ARRAY ` + quoteArray(tables) + ` LOOP
        IF to_regclass(v_table) IS NOT NULL THEN
            PERFORM set_config('lock_timeout',
                greatest(1, ceil(extract(epoch FROM v_end - clock_timestamp()) * 1000))::int || 'ms', true);
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', v_table);
        END IF;
    END LOOP;
    PERFORM set_config('lock_timeout', v_budget, true);
END
$rheo_lock$`
}()

// switchTx is the switch, in two transactions. The first, when a
// migration has switch steps or something is left to hand over, locks
// every table at its start (lockAllSQL) and runs the switch steps and
// the hand-over: catalog changes and catch-ups of what the previous
// release's functions did since the steps before. The second installs
// the functions, after the migrations' install steps, and records the
// new version; it locks no table. In between, and until the follow-ups,
// the previous release's functions run on the new tables, which the
// migrations provide for. installed says that Rheo was there before the
// run: the roles that used it keep their access through the hand-over.
func (r *runner) switchTx(set functionSet, pending []migration, latest int32, installed bool) error {
	var tableSteps bool
	for _, m := range pending {
		for _, s := range m.steps {
			tableSteps = tableSteps || s.kind == stepSwitch
		}
	}
	var handOver bool
	if err := r.tx("switch", false, func(tx pgx.Tx) error {
		if err := r.access(tx); err != nil {
			return err
		}
		return tx.QueryRow(r.ctx, handOverPendingSQL).Scan(&handOver)
	}); err != nil {
		return err
	}
	handOver = handOver && r.in.asOwner
	// Rheo was there before the run and is handed over: the roles that
	// used it keep their access until the follow-ups.
	keep := handOver && installed
	if tableSteps || handOver {
		// One message, which the server runs as one transaction: the
		// tables stay locked for the time the server takes, without a
		// round trip to the client in between.
		q := []string{
			"SELECT set_config('lock_timeout', '" + r.timeout(false) + "', true)",
			setPrefixLiteral(r.names.prefix(), true),
			ownerAccessSQL,
			lockAllSQL,
			createFollowUpsSQL, // before the hand-over, so that it belongs to the owner role
		}
		if keep {
			q = append(q, "SELECT set_config('rheo.upgrading', 'on', true)", keepAccessSQL)
		}
		for _, m := range pending {
			for _, s := range m.steps {
				if s.kind == stepSwitch {
					q = append(q, s.sql)
				}
			}
			for _, f := range m.followUps(stepSwitch) {
				q = append(q, insertFollowUpSQL(f))
			}
		}
		if handOver {
			// The routines are handed over with the functions' install,
			// which locks no table.
			q = append(q, handOverRelationsSQL)
		}
		if keep {
			q = append(q, keepOwnerAccessSQL)
		}
		q = append(q, dropNoFollowUpsSQL, ownerReleaseSQL)
		body := strings.Join(q, ";\n") + ";"
		if err := r.retry("switch", false, func() error {
			_, err := r.conn.Exec(r.ctx, body)
			return err
		}); err != nil {
			return err
		}
	}

	return r.tx("install functions", false, func(tx pgx.Tx) error {
		if err := r.access(tx); err != nil {
			return err
		}
		var current, missing bool
		if err := tx.QueryRow(r.ctx, `SELECT EXISTS (SELECT FROM rheo.function_set WHERE sha256 = $1), (`+grantsMissingSQL+`)`,
			set.sha256).Scan(&current, &missing); err != nil {
			return err
		}
		if len(pending) == 0 && current && !missing {
			r.log.DebugContext(r.ctx, "functions are current", logKeySHA256, set.sha256)
			return nil
		}
		var followUps []string
		for _, m := range pending {
			for _, s := range m.steps {
				if s.kind == stepInstall {
					if _, err := tx.Exec(r.ctx, s.sql); err != nil {
						return fmt.Errorf("%s: %w", m.name, err)
					}
				}
			}
			followUps = append(followUps, m.followUps(stepInstall)...)
		}
		// The previous release's calls in flight, with the caller's
		// privileges, call its helpers until the follow-ups.
		if keep {
			if _, err := tx.Exec(r.ctx, noteRoutineOwnersSQL); err != nil {
				return err
			}
		}
		if err := installFunctions(r.ctx, tx, r.in, len(pending) > 0, r.log, set); err != nil {
			return err
		}
		if keep {
			if _, err := tx.Exec(r.ctx, keepRoutineAccessSQL); err != nil {
				return err
			}
		}
		if len(pending) > 0 {
			if _, err := tx.Exec(r.ctx, fmt.Sprintf("UPDATE %s SET version = %d", versionTable, latest)); err != nil {
				return err
			}
		}
		return r.recordFollowUps(tx, followUps)
	})
}

// recordFollowUps adds follow-ups to rheo.upgrade_follow_ups, which it
// makes when missing, and drops the table when it is left empty.
func (r *runner) recordFollowUps(tx pgx.Tx, followUps []string) error {
	q := []string{createFollowUpsSQL}
	for _, f := range followUps {
		q = append(q, insertFollowUpSQL(f))
	}
	_, err := tx.Exec(r.ctx, strings.Join(append(q, dropNoFollowUpsSQL), ";\n"))
	return err
}

// insertFollowUpSQL records the follow-up sql.
func insertFollowUpSQL(sql string) string {
	return "INSERT INTO rheo.upgrade_follow_ups (after, sql) VALUES (clock_timestamp(), " + dollarQuote(sql, "rheo_follow_up") + ")"
}

// dropNoFollowUpsSQL drops rheo.upgrade_follow_ups when it holds none.
const dropNoFollowUpsSQL = `DO $rheo_none$ BEGIN
    IF NOT EXISTS (SELECT FROM rheo.upgrade_follow_ups) THEN
        DROP TABLE rheo.upgrade_follow_ups;
    END IF;
END $rheo_none$`

// quoteArray is a text[] literal of names, which are Rheo's own constants.
func quoteArray(names []string) string {
	return "ARRAY['" + strings.Join(names, "', '") + "']"
}

// followUps runs the follow-ups that a switch recorded, once the
// transactions that began before it have ended: those this role can see
// in pg_stat_activity are waited for (at most Options.Wait), and each
// follow-up's transaction first locks every table of Rheo's, which waits
// for the calls still in flight in any other. Follow-ups that cannot run
// yet are left for the next run.
func (r *runner) followUps() error {
	var after *time.Time
	if err := r.tx("read the follow-ups", false, func(tx pgx.Tx) error {
		if err := r.access(tx); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(r.ctx, `SELECT to_regclass('rheo.upgrade_follow_ups') IS NOT NULL`).Scan(&exists); err != nil || !exists {
			return err
		}
		after = new(time.Time)
		return tx.QueryRow(r.ctx, `SELECT coalesce(max(f.after), '-infinity') FROM rheo.upgrade_follow_ups f`).Scan(after)
	}); err != nil || after == nil {
		return err
	}
	deadline := time.Now().Add(r.opts.wait())
	for {
		var older int
		if err := r.conn.QueryRow(r.ctx, `
SELECT count(*) FROM pg_stat_activity a
 WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.backend_type = 'client backend'
   AND a.xact_start < $1`, *after).Scan(&older); err != nil {
			return r.fail("wait for the transactions older than the switch", err)
		}
		if older == 0 {
			break
		}
		if time.Now().After(deadline) {
			r.log.InfoContext(r.ctx, "follow-ups left for the next run: transactions that began before the switch are still open",
				"transactions", older)
			return nil
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-r.ctx.Done():
			return r.fail("wait for the transactions older than the switch", r.ctx.Err())
		}
	}
	// One message, one transaction, as the switch.
	body := strings.Join([]string{
		"SELECT set_config('lock_timeout', '" + r.timeout(false) + "', true)",
		setPrefixLiteral(r.names.prefix(), true),
		ownerAccessSQL, lockAllSQL, runFollowUpsSQL, ownerReleaseSQL,
	}, ";\n") + ";"
	return r.retry("follow-ups", false, func() error {
		_, err := r.conn.Exec(r.ctx, body)
		return err
	})
}

// runFollowUpsSQL runs, in the install script, the follow-ups an earlier
// upgrade left: by the time of the next one, the calls of the release
// before it are long over.
const runFollowUpsSQL = `DO $rheo_follow_ups$
DECLARE
    v record;
BEGIN
    IF to_regclass('rheo.upgrade_follow_ups') IS NULL THEN
        RETURN;
    END IF;
    FOR v IN SELECT f.sql FROM rheo.upgrade_follow_ups f ORDER BY f.after LOOP
        EXECUTE v.sql;
    END LOOP;
    DROP TABLE rheo.upgrade_follow_ups;
END
$rheo_follow_ups$`

// createVersionTableSQL makes tern's version table, one row at 0, as
// tern did.
const createVersionTableSQL = `CREATE TABLE IF NOT EXISTS ` + versionTable + ` (version int4 NOT NULL);
INSERT INTO ` + versionTable + ` (version) SELECT 0 WHERE NOT EXISTS (SELECT FROM ` + versionTable + `)`

// createFollowUpsSQL makes the table of follow-ups, which lives from a
// switch that leaves some until they have run. While it exists, the
// previous release's appends in flight may still insert events (see
// immutability.sql).
const createFollowUpsSQL = `CREATE TABLE IF NOT EXISTS rheo.upgrade_follow_ups (
    after timestamptz NOT NULL, -- when it was recorded, which orders them
    sql   text        NOT NULL
)`

// handOverPendingSQL is true when something in schema rheo does not
// belong to the run's owner role yet, which exists.
const handOverPendingSQL = `SELECT EXISTS (SELECT FROM pg_roles o WHERE o.rolname = o_name)
   AND (EXISTS (SELECT FROM pg_namespace n WHERE n.nspname = 'rheo' AND n.nspowner::regrole::text <> o_name)
        OR EXISTS (SELECT FROM pg_class c WHERE c.relnamespace = 'rheo'::regnamespace
                      AND c.relowner::regrole::text <> o_name AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S'))
        OR EXISTS (SELECT FROM pg_proc p WHERE p.pronamespace = 'rheo'::regnamespace
                      AND p.proowner::regrole::text <> o_name))
  FROM (SELECT ` + runPrefix + ` || 'rheo_owner') AS owner(o_name)`

// PostgresFollowUps reports how many follow-ups an upgrade left in the
// database behind conn (see Postgres): 0 once they have run. Such a
// database is not current yet; the next run of Postgres runs them.
func PostgresFollowUps(ctx context.Context, conn *pgx.Conn) (int, error) {
	var n int
	err := readInstalled(ctx, conn, "read the follow-ups", func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('rheo.upgrade_follow_ups') IS NOT NULL`).Scan(&exists); err != nil || !exists {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FROM rheo.upgrade_follow_ups`).Scan(&n)
	})
	return n, err
}

// PostgresCompatibleFrom reports the oldest schema version whose builds
// still work on the database behind conn, as its latest migration
// recorded it (0 when it records none: a release before the record, or
// no install). A build whose latest migration is older must not use the
// database.
func PostgresCompatibleFrom(ctx context.Context, conn *pgx.Conn) (int32, error) {
	var from int32
	err := readInstalled(ctx, conn, "read "+versionTable, func(tx pgx.Tx) error {
		var recorded bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_attribute a
 WHERE a.attrelid = 'rheo.schema_version'::regclass AND a.attname = 'compatible_from' AND NOT a.attisdropped)`).Scan(&recorded); err != nil || !recorded {
			return err
		}
		return tx.QueryRow(ctx, `SELECT coalesce(max(compatible_from), 0) FROM rheo.schema_version`).Scan(&from)
	})
	return from, err
}
