package cli_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo/cmd/rheo/cli"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testpgbouncer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCLIClassifiedFailures checks the lines of failures that the drivers
// classify (rheo.Kind): the command prints the kind, never the driver's
// codes, and the same failure reads the same on SQLite and PostgreSQL.
func TestCLIClassifiedFailures(t *testing.T) {
	t.Setenv(cli.EnvDatabaseURL, "")
	ctx := context.Background()

	t.Run("permission denied names the one role the command needs", func(t *testing.T) {
		db := testdb.NewDatabase(t)
		b := cliOpenBackend(t, db) // migrated
		b.cliStream(t, "orders", 1, 1)
		role := testdb.NewRole(t, "CREATEROLE") // may read the schema version, holds no Rheo role
		asRole := testdb.AsRole(t, db, role)
		for _, c := range []struct {
			args []string
			role string
		}{
			{[]string{"streams"}, "rheo_reader"},
			{[]string{"lag", "orders", "billing"}, "rheo_reader"},
			{[]string{"retention", "orders"}, "rheo_reader"},
			{[]string{"append", "orders", `{"type":"placed"}`}, "rheo_producer"},
			{[]string{"retention", "orders", "--max-age", "30d"}, "rheo_admin"},
			{[]string{"create-stream", "s"}, "rheo_admin"},
			{[]string{"replay", "orders", "billing", "--from-sequence", "0"}, "rheo_admin"},
		} {
			r := cliRun(t, "", append(c.args, "--database-url", asRole)...)
			cliWantFailure(t, r, cli.ExitFailure, fmt.Sprintf(`" needs the role %s for this command; an administrator can: GRANT %s TO %s (docs/security.md)`+"\n",
				c.role, c.role, role))
			for _, other := range []string{"rheo_reader", "rheo_producer", "rheo_consumer", "rheo_admin"} {
				if other != c.role {
					require.NotContains(t, r.stderr, other, "rheo %s names %s too: %s", c.args[0], other, r.stderr)
				}
			}
			cliNoDriverText(t, r)
		}
	})

	t.Run("a schema that lacks a table or function reads the same on SQLite and PostgreSQL", func(t *testing.T) {
		const want = "rheo: the database's Rheo schema does not match this build of rheo ("
		const hint = "); upgrade it with: rheo-migrate up --database-url "

		path := filepath.Join(t.TempDir(), "rheo.db")
		lite := cliOpenBackend(t, "sqlite://"+path)
		lite.cliStream(t, "orders", 1, 1)
		db, err := sql.Open(sqlite.DefaultDriverName(), path)
		require.NoError(t, err)
		defer db.Close()
		_, err = db.ExecContext(ctx, `DROP TABLE rheo_dead_letters`)
		require.NoError(t, err)
		r := lite.run(t, "dead-letters", "orders", "billing")
		cliWantFailure(t, r, cli.ExitFailure, want+"no such table: rheo_dead_letters"+hint)
		cliNoDriverText(t, r)

		pg := cliOpenBackend(t, testdb.NewDatabase(t))
		pg.cliStream(t, "orders", 1, 1)
		conn, err := pgx.Connect(ctx, pg.url)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `DROP FUNCTION rheo.dead_letters`)
		require.NoError(t, err)
		r = pg.run(t, "dead-letters", "orders", "billing")
		cliWantFailure(t, r, cli.ExitFailure, want+"function rheo.dead_letters(")
		require.Contains(t, r.stderr, hint, "no upgrade hint: %s", r)
		cliNoDriverText(t, r)
	})

	t.Run("a lock not granted in time reads the same on SQLite and PostgreSQL", func(t *testing.T) {
		const want = "rheo: a lock was not granted in time ("
		const tail = "); nothing was changed; run the command again\n"

		path := filepath.Join(t.TempDir(), "rheo.db")
		lite := cliOpenBackend(t, "sqlite://"+path)
		holder, err := sql.Open(sqlite.DefaultDriverName(), path)
		require.NoError(t, err)
		defer holder.Close()
		tx, err := holder.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer tx.Rollback()
		_, err = tx.ExecContext(ctx, `INSERT INTO rheo_streams (stream, partition_count, created_at) VALUES ('held', 1, 0)`)
		require.NoError(t, err)
		// The driver waits out its busy timeout (5 s) before it gives up.
		r := lite.run(t, "create-stream", "s")
		cliWantFailure(t, r, cli.ExitFailure, want+"database is locked"+tail)
		cliNoDriverText(t, r)

		pg := cliOpenBackend(t, testdb.NewDatabase(t))
		conn, err := pgx.Connect(ctx, pg.url)
		require.NoError(t, err)
		defer conn.Close(ctx)
		pgTx, err := conn.Begin(ctx)
		require.NoError(t, err)
		defer pgTx.Rollback(context.WithoutCancel(ctx))
		_, err = pgTx.Exec(ctx, `LOCK TABLE rheo.streams IN ACCESS EXCLUSIVE MODE`)
		require.NoError(t, err)
		u, err := url.Parse(pg.url)
		require.NoError(t, err)
		u.RawQuery += "&options=-c%20lock_timeout%3D100"
		r = cliRun(t, "", "create-stream", "s", "--database-url", u.String())
		cliWantFailure(t, r, cli.ExitFailure, want+"canceling statement due to lock timeout"+tail)
		cliNoDriverText(t, r)
	})

	t.Run("through a pooler in transaction mode without exec mode the line points at docs/pgbouncer.md", func(t *testing.T) {
		b := testpgbouncer.Start(t)
		direct := testdb.NewDatabase(t)
		cliOpenBackend(t, direct) // migrated
		pooled := b.URL(t, direct)
		// The first run prepares its statements on a server connection
		// that the pooler hands to the next client, whose same statements
		// are then prepared a second time.
		var r cliResult
		for range 5 {
			if r = cliRun(t, "", "streams", "--database-url", pooled); r.code != cli.ExitOK {
				break
			}
		}
		cliWantFailure(t, r, cli.ExitFailure, "a pooler in transaction mode, such as PgBouncer, is in front of it; "+
			"add default_query_exec_mode=exec to --database-url (docs/pgbouncer.md)\n")
		cliNoDriverText(t, r)
		execMode := cliRun(t, "", "streams", "--database-url", b.URL(t, direct, "default_query_exec_mode", "exec"))
		require.Equal(t, cli.ExitOK, execMode.code, "streams in exec mode: %s", execMode)
	})
}

func TestCLIFlagRefusals(t *testing.T) {
	t.Parallel()
	t.Run("an integer flag that is no integer names the flag and the value", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"create-stream", "s", "--partitions", "abc"}, `invalid value "abc" for flag -partitions: not an integer`},
			{[]string{"create-group", "s", "g", "--max-attempts", "1.5"}, `invalid value "1.5" for flag -max-attempts: not an integer`},
			{[]string{"query", "s", "--limit", "ten"}, `invalid value "ten" for flag -limit: not an integer`},
			{[]string{"query", "s", "--after-sequence", "99999999999999999999"}, `invalid value "99999999999999999999" for flag -after-sequence: out of range`},
			{[]string{"tail", "s", "-n", "x"}, `invalid value "x" for flag -n: not an integer`},
		} {
			r := cliRun(t, "", c.args...)
			cliWantFailure(t, r, cli.ExitUsage, c.want+"\n")
			require.NotContains(t, r.stderr, "parse error", "rheo %s: %s", strings.Join(c.args, " "), r)
		}
	})
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		b.cliStream(t, "orders", 2, 5)
		t.Run("replay and reset refusals name the flags, not the SQL arguments", func(t *testing.T) {
			for _, c := range []struct {
				args []string
				want string
			}{
				{[]string{"replay", "orders", "billing", "--from-sequence", "-1"},
					"rheo replay: invalid_argument: --from-sequence must be between 0 and 9223372036854775806, got -1\n"},
				{[]string{"replay", "orders", "billing", "--from-sequence", "0", "--partition", "7"},
					"rheo replay: invalid_partition: --partition 7 is outside 0..1\n"},
				{[]string{"replay", "orders", "billing", "--from-sequence", "0", "--partition", "7", "--dry-run"},
					"rheo replay: invalid_partition: --partition 7 is outside 0..1\n"},
				{[]string{"reset", "orders", "billing", "--confirm", "--start-after", "-4"},
					"rheo reset: invalid_argument: --start-after must be between 0 and 9223372036854775806, got -4\n"},
				{[]string{"reset", "orders", "billing", "--confirm", "--partition", "2"},
					"rheo reset: invalid_partition: --partition 2 is outside 0..1\n"},
			} {
				r := b.run(t, c.args...)
				cliWantFailure(t, r, cli.ExitUsage, c.want)
				for _, arg := range []string{"from_sequence", "start_after", "partitions"} {
					require.NotContains(t, r.stderr, arg, "rheo %s names the SQL argument %s: %s", strings.Join(c.args, " "), arg, r)
				}
			}
		})
	})
}

// TestCLINewcomerFacts checks what the docs tell a newcomer where they
// read it, against what the code does.
func TestCLINewcomerFacts(t *testing.T) {
	t.Parallel()
	read := func(t *testing.T, path string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "..", "..", path))
		require.NoError(t, err)
		return strings.Join(strings.Fields(string(b)), " ")
	}
	t.Run("docs/concepts.md says keyless events go to partition 0, and they do", func(t *testing.T) {
		concepts := read(t, "docs/concepts.md")
		require.Contains(t, concepts, "An event appended with no key", "docs/concepts.md does not say where keyless events go")
		require.Contains(t, concepts, "goes to **partition 0**", "docs/concepts.md does not say where keyless events go")
		cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
			b.cliStream(t, "spread", 4, 1)
			for range 3 {
				got := cliJSON[map[string]any](t, b.ok(t, "append", "spread", `{"type":"tick"}`, "--output", "json"))
				require.Equal(t, float64(0), got["partition"], "a keyless event went to another partition")
			}
		})
	})
	t.Run("CONTRIBUTING.md names the tests' Docker fallback, the image internal/testdb starts", func(t *testing.T) {
		src := read(t, "internal/testdb/testdb.go")
		image := regexp.MustCompile(`tcpostgres\.Run\(ctx, "([^"]+)"`).FindStringSubmatch(src)
		require.NotNil(t, image, "internal/testdb starts no container")
		want := "when a Docker engine answers, a `" + image[1] + "` container"
		require.Contains(t, read(t, "CONTRIBUTING.md"), want, "CONTRIBUTING.md does not say %q", want)
	})
	t.Run("the docs say the group page lists leases and the events page keeps the query's order", func(t *testing.T) {
		dashboardDoc := read(t, "docs/dashboard.md")
		for _, want := range []string{
			"its deliveries in progress, the soonest due first (`rheo.leases`",
			"in the query's `(sequence, partition)` order",
			"`rheo query` orders by time instead",
		} {
			assert.Contains(t, dashboardDoc, want, "docs/dashboard.md does not say %q", want)
		}
		ops := read(t, "docs/ops.md")
		for _, wrong := range []string{"lists no leases", "shows no leases", "the events page is `rheo query`"} {
			assert.NotContains(t, ops, wrong, "the docs say %q", wrong)
			assert.NotContains(t, dashboardDoc, wrong, "the docs say %q", wrong)
		}
	})
}
