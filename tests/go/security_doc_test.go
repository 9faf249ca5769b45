package tests

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/stretchr/testify/require"
)

// TestSecurityRoles checks the roles table of docs/security.md against an
// install: each row lists exactly the functions its role may call beyond
// the roles it includes (reader for producer and consumer, both for
// admin).
func TestSecurityRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testbackend.PostgresURL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)

	callable := func(role string) []string {
		rows, err := conn.Query(ctx, `
			SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
			WHERE n.nspname = 'rheo' AND has_function_privilege($1, p.oid, 'EXECUTE')
			  AND NOT has_function_privilege('public', p.oid, 'EXECUTE')
			ORDER BY 1`, role)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return slices.Compact(names)
	}
	minus := func(set []string, others ...[]string) []string {
		var out []string
		for _, name := range set {
			if !slices.ContainsFunc(others, func(o []string) bool { return slices.Contains(o, name) }) {
				out = append(out, name)
			}
		}
		return out
	}
	reader, producer, consumer, admin := callable("rheo_reader"), callable("rheo_producer"), callable("rheo_consumer"), callable("rheo_admin")
	want := map[string][]string{
		"rheo_reader":   reader,
		"rheo_producer": minus(producer, reader),
		"rheo_consumer": minus(consumer, reader),
		"rheo_admin":    minus(admin, producer, consumer),
	}

	doc := readRepo(t, "docs/security.md")
	for role, functions := range want {
		row := regexp.MustCompile("(?m)^\\| `" + role + "` \\| ([^|]*) \\|").FindStringSubmatch(doc)
		require.NotNil(t, row, "docs/security.md has a row for %s", role)
		var listed []string
		for _, m := range regexp.MustCompile("`([a-z_.]+)`").FindAllStringSubmatch(row[1], -1) {
			if !strings.Contains(m[1], ".") { // tables are named rheo.events, rheo.group_status
				listed = append(listed, m[1])
			}
		}
		slices.Sort(listed)
		require.Equal(t, functions, listed, "docs/security.md's %s row lists the functions the role may call beyond those it includes", role)
	}
}
