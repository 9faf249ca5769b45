package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rheo-go/rheo/retention"
)

// DefaultVacuumEvery is the default of Options.VacuumEvery.
const DefaultVacuumEvery = retention.DefaultVacuumEvery

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

// vacuumDeliveries is the vacuum of rheo.deliveries that retention's
// Vacuumer runs after every Options.VacuumEvery settles of the driver:
// retention.ErrVacuumRefused when the role may not.
func vacuumDeliveries(pool *pgxpool.Pool) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var may bool
		if err := pool.QueryRow(ctx, mayVacuumSQL).Scan(&may); err != nil {
			return err
		}
		if !may {
			return retention.ErrVacuumRefused
		}
		_, err := pool.Exec(ctx, vacuumSQL)
		return err
	}
}
