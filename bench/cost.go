package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// walLSN is the server's current WAL position in bytes. The position is
// server-wide: other databases' writes in the same interval count too.
func walLSN(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var lsn int64
	err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn`).Scan(&lsn)
	return lsn, err
}

// relation is the size of one table or index of a system's schema.
type relation struct {
	Table    string // the table, or the table an index belongs to
	Name     string // the relation itself
	Index    bool
	Bytes    int64
	DeadRows int64 // tables only: n_dead_tup
	LiveRows int64 // tables only: n_live_tup
}

// statsFlushWait lets the backends of a finished workload publish their
// table statistics (PostgreSQL flushes them at most once a second).
const statsFlushWait = 1500 * time.Millisecond

// relations lists every table and index of schema with its size and, for
// tables, the dead and live tuple counts.
func relations(ctx context.Context, pool *pgxpool.Pool, schema string) ([]relation, error) {
	rows, err := pool.Query(ctx, `
		SELECT coalesce(t.relname, c.relname), c.relname, c.relkind = 'i', pg_relation_size(c.oid),
		       coalesce(s.n_dead_tup, 0), coalesce(s.n_live_tup, 0)
		  FROM pg_class c
		  JOIN pg_namespace n ON n.oid = c.relnamespace
		  LEFT JOIN pg_index i ON i.indexrelid = c.oid
		  LEFT JOIN pg_class t ON t.oid = i.indrelid
		  LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
		 WHERE n.nspname = $1 AND c.relkind IN ('r', 'i')
		 ORDER BY 1, c.relkind DESC, 2`, schema)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[relation])
}

// totals sums the bytes of the relations of tables (all when tables is
// empty) and the dead tuples of those tables.
func totals(rels []relation, tables ...string) (bytes, dead int64) {
	for _, r := range rels {
		if len(tables) > 0 && !contains(tables, r.Table) {
			continue
		}
		bytes += r.Bytes
		dead += r.DeadRows
	}
	return bytes, dead
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

const mb = 1 << 20

// relationsText is a table of relations, one a line, with their kind,
// size and, for tables, the live and dead tuples.
func relationsText(rels []relation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-38s %-6s %12s %12s %12s\n", "relation", "kind", "size", "live tuples", "dead tuples")
	for _, rel := range rels {
		kind, live, dead := "table", fmt.Sprint(rel.LiveRows), fmt.Sprint(rel.DeadRows)
		if rel.Index {
			kind, live, dead = "index", "", ""
		}
		fmt.Fprintf(&b, "  %-38s %-6s %12s %12s %12s\n", rel.Name, kind, humanBytes(rel.Bytes), live, dead)
	}
	return b.String()
}

func humanBytes(b int64) string {
	switch {
	case b >= mb:
		return fmt.Sprintf("%.1f MB", float64(b)/mb)
	case b >= 1<<10:
		return fmt.Sprintf("%.0f kB", float64(b)/(1<<10))
	default:
		return fmt.Sprintf("%d B", b)
	}
}
