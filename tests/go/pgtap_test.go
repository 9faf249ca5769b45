package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testskip"
)

// TestSQL runs every pgTAP file in tests/sql against one freshly installed
// database, one subtest per file. Each file runs on its own connection and
// rolls its changes back, so the files do not see each other's data.
func TestSQL(t *testing.T) {
	t.Parallel()
	url := pgtapInstalledDatabase(t)
	ctx := context.Background()

	conn := pgtapConnect(t, url)
	var available bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pgtap')`).Scan(&available),
		"look for pgTAP")
	if !available {
		testskip.Missing(t, "pgTAP", "the pgTAP extension is not installed on the server; apt-get install postgresql-15-pgtap")
	}
	_, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pgtap")
	require.NoError(t, err, "create extension pgtap")

	files, err := filepath.Glob(filepath.Join("..", "sql", "*_test.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "tests/sql/*_test.sql files")
	sort.Strings(files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			script, err := os.ReadFile(file)
			require.NoError(t, err)
			lines, err := pgtapExec(ctx, pgtapConnect(t, url).PgConn(), string(script))
			for _, problem := range pgtapProblems(lines) {
				assert.Fail(t, problem)
			}
			if err != nil {
				assert.Fail(t, "the script stopped with an error", "%s stopped with an error after %q: %s", filepath.Base(file),
					pgtapLastTest(lines), testdb.DescribeError(err, string(script)))
			}
		})
	}
}

// pgtapInstalledDatabase returns the URL of a fresh database with Rheo
// installed by migrate.Postgres (a copy of the test binary's template).
func pgtapInstalledDatabase(t *testing.T) string {
	t.Helper()
	return testbackend.PostgresURL(t)
}

// pgtapConnect opens a connection that is closed when t ends.
func pgtapConnect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err, "connect")
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(context.Background())) })
	return conn
}

// pgtapExec runs a script with the simple protocol, as psql would, and
// returns every line of text it printed. The lines read before an error
// are returned with it.
func pgtapExec(ctx context.Context, conn *pgconn.PgConn, script string) ([]string, error) {
	results, err := conn.Exec(ctx, script).ReadAll()
	var lines []string
	for _, r := range results {
		for _, row := range r.Rows {
			for _, value := range row {
				lines = append(lines, strings.Split(string(value), "\n")...)
			}
		}
		if r.Err != nil && err == nil {
			err = r.Err
		}
	}
	return lines, err
}

var (
	pgtapPlanLine = regexp.MustCompile(`^1\.\.(\d+)$`)
	pgtapTestLine = regexp.MustCompile(`^(not )?ok \d+`)
)

// pgtapProblems reads TAP output and reports every failed test with the
// diagnostics that follow it, a missing plan, and a plan that does not
// match the number of tests run.
func pgtapProblems(lines []string) []string {
	var problems []string
	planned, ran := -1, 0
	failing := -1 // index in problems of the last failed test, for its diagnostics
	for _, line := range lines {
		switch {
		case pgtapPlanLine.MatchString(line):
			planned, _ = strconv.Atoi(pgtapPlanLine.FindStringSubmatch(line)[1])
			failing = -1
		case pgtapTestLine.MatchString(line):
			ran++
			failing = -1
			if strings.HasPrefix(line, "not ") {
				problems = append(problems, line)
				failing = len(problems) - 1
			}
		case strings.HasPrefix(line, "#") && failing >= 0:
			problems[failing] += "\n" + line
		}
	}
	switch {
	case planned < 0:
		problems = append(problems, fmt.Sprintf("no plan line; %d tests ran", ran))
	case planned != ran:
		problems = append(problems, fmt.Sprintf("planned %d tests but %d ran", planned, ran))
	}
	return problems
}

// pgtapLastTest returns the last test line of TAP output, or "the start"
// when no test ran.
func pgtapLastTest(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if pgtapTestLine.MatchString(lines[i]) {
			return lines[i]
		}
	}
	return "the start"
}
