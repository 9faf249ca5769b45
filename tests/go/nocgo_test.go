package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The PostgreSQL-only packages and commands, which must build without cgo.
var noCgoPackages = []string{"./connect", "./worker", "./driver/postgres", "./cmd/rheo", "./cmd/rheo-migrate"}

// TestBuildWithoutCgo builds the commands with CGO_ENABLED=0, as a static
// PostgreSQL-only program is built, and runs them: without SQLite they
// refuse SQLite URLs and say how to build with it, and they work on
// PostgreSQL. With the tag rheo_modernc the same build has SQLite, in
// pure Go. .ci/run builds the same packages with the same settings first,
// so these builds find their packages compiled.
func TestBuildWithoutCgo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the commands: not in -short")
	}
	goTool := goCommand(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	bin := t.TempDir()
	build := func(t *testing.T, out string, tags string, pkgs ...string) {
		t.Helper()
		args := []string{"build", "-o", out}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		cmd := exec.Command(goTool, append(args, pkgs...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		output, err := cmd.CombinedOutput()
		require.NoError(t, err, "CGO_ENABLED=0 go %s:\n%s", strings.Join(cmd.Args[1:], " "), output)
	}

	t.Run("the PostgreSQL-only packages link no SQLite", func(t *testing.T) {
		cmd := exec.Command(goTool, append([]string{"list", "-deps"}, noCgoPackages...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go list:\n%s", out)
		for _, dep := range strings.Fields(string(out)) {
			assert.False(t, strings.HasPrefix(dep, "github.com/mattn/go-sqlite3") || strings.HasPrefix(dep, "modernc.org/"),
				"a CGO_ENABLED=0 build depends on %s", dep)
		}
	})

	noSQLite := filepath.Join(bin, "nosqlite") + string(filepath.Separator)
	build(t, noSQLite, "", "./cmd/rheo", "./cmd/rheo-migrate")
	rheoBin, migrateBin := filepath.Join(noSQLite, "rheo"), filepath.Join(noSQLite, "rheo-migrate")
	const hint = "build with CGO_ENABLED=1 (github.com/mattn/go-sqlite3, needs a C compiler such as gcc) " +
		"or with -tags rheo_modernc (modernc.org/sqlite, pure Go)"

	t.Run("a built rheo knows its version from the build information", func(t *testing.T) {
		r := wantBinaryOK(t, rheoBin, ", "+runtime.Version()+" ", "--version")
		assert.True(t, strings.HasPrefix(r.stdout, "rheo "), "rheo --version: %s", r)
	})

	t.Run("rheo without SQLite refuses an SQLite URL and says how to build with SQLite", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "rheo.db")
		r := runBinary(t, rheoBin, "streams", "--database-url", "sqlite://"+db)
		wantBinaryFailure(t, r, 1, "rheo: this build of rheo has no SQLite driver: "+hint+
			"; or use a PostgreSQL database: --database-url postgres://…")
		_, err := os.Stat(db)
		require.True(t, os.IsNotExist(err), "the refusal created %s: %v", db, err)
		r = runBinary(t, rheoBin, "streams", "--database-url", "sqlite::memory:")
		wantBinaryFailure(t, r, 1, "this build of rheo has no SQLite driver")
	})

	t.Run("rheo demo without SQLite says how to get it or to run on PostgreSQL", func(t *testing.T) {
		r := runBinary(t, rheoBin, "demo")
		wantBinaryFailure(t, r, 1, "rheo: the demo runs on embedded SQLite by default, and this build of rheo has no SQLite driver: "+
			hint+"; or run the demo on PostgreSQL: rheo demo --database-url postgres://…")
	})

	t.Run("rheo-migrate without SQLite refuses an SQLite URL", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "rheo.db")
		r := runBinary(t, migrateBin, "up", "--database-url", "sqlite://"+db)
		wantBinaryFailure(t, r, 1, "rheo-migrate: this build of rheo-migrate has no SQLite driver: "+hint)
		wantBinaryOK(t, migrateBin, "CREATE TABLE rheo_events", "sql", "--sqlite")
	})

	// The demos wait out the worker's back-off: the two that follow run
	// side by side.
	t.Run("rheo and rheo-migrate without cgo work on PostgreSQL", func(t *testing.T) {
		t.Parallel()
		url := testdb.NewDatabase(t)
		wantBinaryOK(t, migrateBin, "", "up", "--database-url", url)
		wantBinaryOK(t, rheoBin, "", "create-stream", "static", "--partitions", "2", "--database-url", url)
		wantBinaryOK(t, rheoBin, "Demo complete", "demo", "--database-url", url)
		wantBinaryOK(t, rheoBin, "static", "streams", "--database-url", url)
	})

	t.Run("with the tag rheo_modernc the build without cgo has SQLite", func(t *testing.T) {
		out := filepath.Join(bin, "modernc") + string(filepath.Separator)
		t.Parallel()
		build(t, out, "rheo_modernc", "./cmd/rheo", "./cmd/rheo-migrate")
		r := wantBinaryOK(t, filepath.Join(out, "rheo"), "Demo complete", "demo")
		assert.Contains(t, r.stdout, "on SQLite", "rheo demo built with rheo_modernc")
		url := "sqlite://" + filepath.Join(t.TempDir(), "rheo.db")
		wantBinaryOK(t, filepath.Join(out, "rheo-migrate"), "", "up", "--database-url", url)
		wantBinaryOK(t, filepath.Join(out, "rheo"), "", "create-stream", "pure", "--database-url", url)
		wantBinaryOK(t, filepath.Join(out, "rheo-migrate"), "status: up to date", "status", "--database-url", url)
	})
}

// goCommand returns the go command of the toolchain running the tests.
func goCommand(t *testing.T) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err == nil {
		return goTool
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		require.NotEqual(t, "true", os.Getenv("CI"), "no go command to build with")
		t.Skip("no go command to build with")
	}
	return goTool
}

// binaryResult is what one run of a command printed and returned.
type binaryResult struct {
	code           int
	stdout, stderr string
}

func (r binaryResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runBinary runs a built command with a clean DATABASE_URL and returns
// what it printed.
func runBinary(t *testing.T, bin string, args ...string) binaryResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "DATABASE_URL=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		exitErr, ok := err.(*exec.ExitError)
		require.True(t, ok, "run %s: %v", bin, err)
		code = exitErr.ExitCode()
	}
	return binaryResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// wantBinaryFailure checks the exit status and that stderr is one line
// holding want.
func wantBinaryFailure(t *testing.T, r binaryResult, code int, want string) {
	t.Helper()
	require.True(t, r.code == code && strings.Contains(r.stderr, want) && !strings.Contains(strings.TrimSpace(r.stderr), "\n"),
		"want exit %d and one line holding %q; got %s", code, want, r)
}

// wantBinaryOK runs a built command, checks that it succeeds and prints
// want (empty: anything) on stdout, and returns what it printed.
func wantBinaryOK(t *testing.T, bin, want string, args ...string) binaryResult {
	t.Helper()
	r := runBinary(t, bin, args...)
	require.True(t, r.code == 0 && strings.Contains(r.stdout, want), "%s %s: %s", filepath.Base(bin), strings.Join(args, " "), r)
	return r
}
