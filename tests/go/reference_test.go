package tests

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/driver"
)

// referencePath is the project's reference of the SQL API.
var referencePath = filepath.Join("..", "..", "docs", "reference.md")

// refFunction is one function as docs/reference.md documents it, or as
// it is installed: its arguments and result as pg_get_function_arguments
// and pg_get_function_result print them, and the roles granted EXECUTE.
type refFunction struct {
	Name, Args, Result string
	Roles              []string
}

// refRelation is the table, type or view of a reference block: its
// columns as "name type", the type as format_type prints it.
type refRelation struct {
	Kind, Name string
	Columns    []string
	Roles      []string
	Granted    bool // the section has a "Granted to:" line
}

var (
	refSection   = regexp.MustCompile(`(?m)^### (\d+\.\d+) (.+)$`)
	refBlock     = regexp.MustCompile("(?s)```sql\n(.*?)```")
	refSignature = regexp.MustCompile(`(?s)^rheo\.([a-z][a-z_]*)\((.*)\)\s+RETURNS\s+(.+)$`)
	refRelBlock  = regexp.MustCompile(`(?s)^(TABLE|TYPE|VIEW) rheo\.([a-z][a-z_]*) \((.*)\)$`)
	refGranted   = regexp.MustCompile("(?m)^Granted to: (.*)$")
	refRole      = regexp.MustCompile("`(rheo_[a-z]+)`")
	refGoMethod  = regexp.MustCompile("`Driver\\.([A-Za-z]+)`")
	refExitRow   = regexp.MustCompile(`(?m)^\| ([0-9]+) \|`)
	refFlagRow   = regexp.MustCompile("(?m)^\\| `--([a-z-]+)[^`]*` \\|")
	refFlagDef   = regexp.MustCompile(`\bfs\.(?:String|Bool|Int|Duration)\("([a-z-]+)"`)
	refErrorRow  = regexp.MustCompile("(?m)^\\| (RH[0-9]{3})? ?\\| `([a-z_]+)` \\| `(Err[A-Za-z]+)` \\|")
)

// referenceSections splits the reference into its numbered subsections,
// keyed by "5.1 fetch".
func referenceSections(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(referencePath)
	require.NoError(t, err)
	text := string(doc)
	sections := map[string]string{}
	heads := refSection.FindAllStringSubmatchIndex(text, -1)
	require.NotEmpty(t, heads, "docs/reference.md has no numbered sections")
	for i, h := range heads {
		end := len(text)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		// A top-level heading ends a subsection too.
		body := text[h[1]:end]
		if j := strings.Index(body, "\n## "); j >= 0 {
			body = body[:j]
		}
		title := text[h[2]:h[3]] + " " + text[h[4]:h[5]]
		require.NotContains(t, sections, title, "docs/reference.md repeats section %s", title)
		sections[title] = body
	}
	return sections
}

// referenceDocumented reads the signature blocks and grants of the
// reference: the functions by name and identity, and the relations.
func referenceDocumented(t *testing.T) ([]refFunction, []refRelation) {
	t.Helper()
	var funcs []refFunction
	var rels []refRelation
	for title, body := range referenceSections(t) {
		var roles []string
		granted := refGranted.FindStringSubmatch(body)
		if granted != nil {
			for _, m := range refRole.FindAllStringSubmatch(granted[1], -1) {
				roles = append(roles, m[1])
			}
			slices.Sort(roles)
		}
		for _, block := range refBlock.FindAllStringSubmatch(body, -1) {
			text := strings.TrimSpace(block[1])
			if m := refSignature.FindStringSubmatch(text); m != nil {
				require.NotNil(t, granted, "section %s documents rheo.%s without a \"Granted to:\" line", title, m[1])
				funcs = append(funcs, refFunction{Name: m[1], Args: oneLine(m[2]), Result: oneLine(m[3]), Roles: roles})
				continue
			}
			if m := refRelBlock.FindStringSubmatch(text); m != nil {
				var cols []string
				for _, c := range strings.Split(m[3], ",") {
					cols = append(cols, oneLine(c))
				}
				rels = append(rels, refRelation{Kind: m[1], Name: m[2], Columns: cols, Roles: roles, Granted: granted != nil})
				continue
			}
			require.False(t, strings.HasPrefix(text, "rheo."),
				"section %s has a block that starts like a signature but does not parse as one:\n%s", title, text)
		}
	}
	require.NotEmpty(t, funcs, "docs/reference.md documents no function")
	return funcs, rels
}

// oneLine joins a block's lines into one, with single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestReference checks docs/reference.md against an installed database:
// every public function of schema rheo is documented with the arguments,
// defaults, result and grants it has, and every documented one exists;
// the documented table, type and view have the documented columns; and
// the error table names the sentinels of errors.go.
func TestReference(t *testing.T) {
	t.Parallel()
	funcs, rels := referenceDocumented(t)
	ctx := context.Background()
	conn := pgtapConnect(t, pgtapInstalledDatabase(t))

	t.Run("every function is documented as installed, and every documented one is installed", func(t *testing.T) {
		installed := referenceInstalled(ctx, t, conn)
		documented := referenceCanonical(ctx, t, conn, funcs)
		for key, got := range installed {
			want, ok := documented[key]
			if !assertDocumented(t, ok, "rheo.%s is installed but docs/reference.md does not document it", key) {
				continue
			}
			// Expected: the reference; actual: the install.
			require.Equal(t, want.Args, got.Args, "the arguments of rheo.%s", key)
			require.Equal(t, want.Result, got.Result, "the result of rheo.%s", key)
			require.Equal(t, want.Roles, got.Roles, "the roles granted EXECUTE on rheo.%s (its \"Granted to:\" line)", key)
		}
		for key := range documented {
			_, ok := installed[key]
			assertDocumented(t, ok, "docs/reference.md documents rheo.%s, which is not installed", key)
		}
	})

	t.Run("the documented table, type and view have their columns and grants", func(t *testing.T) {
		require.NotEmpty(t, rels, "docs/reference.md documents no table, type or view")
		for _, rel := range rels {
			var want []string
			for _, col := range rel.Columns {
				name, typ, ok := strings.Cut(col, " ")
				require.True(t, ok, "column %q of rheo.%s has no type", col, rel.Name)
				var canonical *string
				require.NoError(t, conn.QueryRow(ctx, `SELECT format_type(to_regtype($1), NULL)`, typ).Scan(&canonical))
				require.NotNil(t, canonical, "column %s of rheo.%s: %q is not a type", name, rel.Name, typ)
				want = append(want, strings.Trim(name, `"`)+" "+*canonical)
			}
			kinds := map[string]string{"TABLE": "r", "TYPE": "c", "VIEW": "v"}
			rows, err := conn.Query(ctx, `
				SELECT a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
				  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
				 WHERE c.relnamespace = 'rheo'::regnamespace AND c.relname = $1 AND c.relkind = $2
				   AND a.attnum > 0 AND NOT a.attisdropped
				 ORDER BY a.attnum`, rel.Name, kinds[rel.Kind])
			require.NoError(t, err)
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.Equal(t, want, got, "the columns of %s rheo.%s", rel.Kind, rel.Name)
			if rel.Kind == "TYPE" {
				continue
			}
			require.True(t, rel.Granted, "%s rheo.%s has no \"Granted to:\" line", rel.Kind, rel.Name)
			rows, err = conn.Query(ctx, `
				SELECT DISTINCT a.grantee::regrole::text
				  FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
				 WHERE c.relnamespace = 'rheo'::regnamespace AND c.relname = $1
				   AND a.grantee <> c.relowner AND a.privilege_type = 'SELECT'
				 ORDER BY 1`, rel.Name)
			require.NoError(t, err)
			roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.Equal(t, rel.Roles, roles, "the roles granted SELECT on rheo.%s", rel.Name)
		}
	})

	t.Run("the Go methods named are methods of driver.Driver", func(t *testing.T) {
		doc, err := os.ReadFile(referencePath)
		require.NoError(t, err)
		named := refGoMethod.FindAllStringSubmatch(string(doc), -1)
		require.NotEmpty(t, named, "docs/reference.md names no Driver method")
		methods := reflect.TypeFor[driver.Driver]()
		for _, m := range named {
			_, ok := methods.MethodByName(m[1])
			require.True(t, ok, "docs/reference.md names Driver.%s, which driver.Driver does not have", m[1])
		}
	})

	t.Run("the exit statuses are those the commands declare", func(t *testing.T) {
		sections := referenceSections(t)
		for section, source := range map[string]string{
			"11.1 rheo":         filepath.Join("..", "..", "cmd", "rheo", "cli", "cli.go"),
			"11.2 rheo-migrate": filepath.Join("..", "..", "cmd", "rheo-migrate", "main.go"),
		} {
			body, ok := sections[section]
			require.True(t, ok, "docs/reference.md has no section %s", section)
			var documented []int
			for _, m := range refExitRow.FindAllStringSubmatch(body, -1) {
				n, err := strconv.Atoi(m[1])
				require.NoError(t, err)
				documented = append(documented, n)
			}
			require.Equal(t, documented, referenceExitStatuses(t, source), "the statuses of §%s against the constants of %s", section, source)
		}
	})

	t.Run("the flags of rheo-migrate are those it defines", func(t *testing.T) {
		body, ok := referenceSections(t)["11.3 rheo-migrate flags"]
		require.True(t, ok, "docs/reference.md has no section 11.3 rheo-migrate flags")
		var documented []string
		for _, m := range refFlagRow.FindAllStringSubmatch(body, -1) {
			documented = append(documented, m[1])
		}
		slices.Sort(documented)
		source, err := os.ReadFile(filepath.Join("..", "..", "cmd", "rheo-migrate", "main.go"))
		require.NoError(t, err)
		var defined []string
		for _, m := range refFlagDef.FindAllStringSubmatch(string(source), -1) {
			if !slices.Contains(defined, m[1]) {
				defined = append(defined, m[1])
			}
		}
		slices.Sort(defined)
		require.NotEmpty(t, defined, "cmd/rheo-migrate/main.go defines no flag")
		require.Equal(t, documented, defined, "the flags of §11.3 against those cmd/rheo-migrate/main.go defines")
	})

	t.Run("the error table names the sentinels of errors.go", func(t *testing.T) {
		sections := referenceSections(t)
		var table string
		for title, body := range sections {
			if strings.HasPrefix(title, "10.1 ") {
				table = body
			}
		}
		require.NotEmpty(t, table, "docs/reference.md has no section 10.1")
		var documented []string
		for _, m := range refErrorRow.FindAllStringSubmatch(table, -1) {
			documented = append(documented, fmt.Sprintf("%s %s %s", m[3], m[1], m[2]))
		}
		slices.Sort(documented)
		require.Equal(t, documented, referenceSentinels(t),
			"docs/reference.md §10.1 against the sentinels of errors.go (name, SQLSTATE, word)")
	})
}

// assertDocumented reports a function documented on one side only, and
// returns ok.
func assertDocumented(t *testing.T, ok bool, format string, args ...any) bool {
	t.Helper()
	return assert.Truef(t, ok, format, args...)
}

// referenceInstalled returns the public functions of schema rheo (the
// helpers, rheo._*, are internal), keyed by name and identity arguments.
func referenceInstalled(ctx context.Context, t *testing.T, conn *pgx.Conn) map[string]refFunction {
	t.Helper()
	rows, err := conn.Query(ctx, `
		SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
		       p.proname, pg_get_function_arguments(p.oid), pg_get_function_result(p.oid),
		       ARRAY(SELECT a.grantee::regrole::text
		               FROM aclexplode(p.proacl) a
		              WHERE a.grantee <> p.proowner AND a.privilege_type = 'EXECUTE'
		              ORDER BY 1)
		  FROM pg_proc p
		 WHERE p.pronamespace = 'rheo'::regnamespace AND p.proname NOT LIKE '\_%'`)
	require.NoError(t, err)
	installed := map[string]refFunction{}
	for rows.Next() {
		var key string
		var f refFunction
		require.NoError(t, rows.Scan(&key, &f.Name, &f.Args, &f.Result, &f.Roles))
		installed[key] = f
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, installed, "no public function installed in schema rheo")
	return installed
}

// referenceCanonical has PostgreSQL print the documented signatures as
// it prints the installed ones: each is created, with an empty body, in a
// scratch schema of a transaction that is rolled back, and read back as
// referenceInstalled reads the installed ones, under the same keys.
func referenceCanonical(ctx context.Context, t *testing.T, conn *pgx.Conn, funcs []refFunction) map[string]refFunction {
	t.Helper()
	canonical := map[string]refFunction{}
	for _, f := range funcs {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `CREATE SCHEMA reference_check`)
		require.NoError(t, err)
		// The text comes from the repository's own docs, not from input.
		ddl := fmt.Sprintf("CREATE FUNCTION reference_check.%s(%s) RETURNS %s LANGUAGE plpgsql AS $$BEGIN END$$",
			f.Name, f.Args, f.Result)
		_, err = tx.Exec(ctx, ddl)
		require.NoError(t, err, "the signature of rheo.%s in docs/reference.md is not valid SQL:\n%s", f.Name, ddl)
		var key string
		c := refFunction{Name: f.Name, Roles: f.Roles}
		require.NoError(t, tx.QueryRow(ctx, `
			SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
			       pg_get_function_arguments(p.oid), pg_get_function_result(p.oid)
			  FROM pg_proc p
			 WHERE p.pronamespace = 'reference_check'::regnamespace`).Scan(&key, &c.Args, &c.Result))
		require.NoError(t, tx.Rollback(ctx))
		require.NotContains(t, canonical, key, "docs/reference.md documents rheo.%s twice", key)
		canonical[key] = c
	}
	return canonical
}

// referenceGoValues returns the named values a Go file declares at any
// level (const and var specs), in the order they appear.
func referenceGoValues(t *testing.T, path string) []referenceGoValue {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	require.NoError(t, err)
	var values []referenceGoValue
	ast.Inspect(file, func(n ast.Node) bool {
		if spec, ok := n.(*ast.ValueSpec); ok {
			for i, id := range spec.Names {
				if i < len(spec.Values) {
					values = append(values, referenceGoValue{id.Name, spec.Values[i]})
				}
			}
		}
		return true
	})
	return values
}

// referenceGoValue is one name = value of a Go declaration.
type referenceGoValue struct {
	Name  string
	Value ast.Expr
}

// referenceExitStatuses lists the values of the exit status constants
// (ExitX or exitX = N) declared in a Go file, sorted.
func referenceExitStatuses(t *testing.T, path string) []int {
	t.Helper()
	name := regexp.MustCompile(`^[Ee]xit[A-Z]`)
	var statuses []int
	for _, v := range referenceGoValues(t, path) {
		lit, ok := v.Value.(*ast.BasicLit)
		if !name.MatchString(v.Name) || !ok || lit.Kind != token.INT {
			continue
		}
		n, err := strconv.Atoi(lit.Value)
		require.NoError(t, err)
		statuses = append(statuses, n)
	}
	require.NotEmpty(t, statuses, "%s declares no exit status", path)
	slices.Sort(statuses)
	return statuses
}

// referenceSentinels lists the sentinel errors declared in errors.go
// (var ErrX = &Error{Code: …, Reason: …}) as "ErrX CODE word", sorted.
func referenceSentinels(t *testing.T) []string {
	t.Helper()
	var sentinels []string
	for _, v := range referenceGoValues(t, filepath.Join("..", "..", "errors.go")) {
		addr, ok := v.Value.(*ast.UnaryExpr)
		if !ok || addr.Op != token.AND {
			continue
		}
		lit, ok := addr.X.(*ast.CompositeLit)
		if typ, isIdent := lit.Type.(*ast.Ident); !ok || !isIdent || typ.Name != "Error" {
			continue
		}
		fields := map[string]string{}
		for _, elt := range lit.Elts {
			kv := elt.(*ast.KeyValueExpr)
			value, err := strconv.Unquote(kv.Value.(*ast.BasicLit).Value)
			require.NoError(t, err)
			fields[kv.Key.(*ast.Ident).Name] = value
		}
		sentinels = append(sentinels, strings.TrimSpace(fmt.Sprintf("%s %s %s", v.Name, fields["Code"], fields["Reason"])))
	}
	require.NotEmpty(t, sentinels, "errors.go declares no sentinel")
	slices.Sort(sentinels)
	return sentinels
}
