package migrate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testskip"
	"github.com/rheo-go/rheo/migrate"
)

// previousRelease is the release before this build, whose Go driver
// must keep working against this build's schema (docs/upgrading.md).
const previousRelease = "376d670"

// oldReport is what testdata/olddriver prints.
type oldReport struct {
	AppendedBefore int64    `json:"appended_before"`
	Appended       int64    `json:"appended"`
	Handled        int64    `json:"handled"`
	Reappended     bool     `json:"reappended"`
	AuditAcked     int64    `json:"audit_acked"`
	Replayed       int64    `json:"replayed"`
	ReplayAcked    int64    `json:"replay_acked"`
	Lag            int64    `json:"lag"`
	Errors         []string `json:"errors"`
}

// TestOldDriver runs the previous release's Go code, not only its SQL,
// across an upgrade: it takes that release's source from git history,
// builds testdata/olddriver against it (its driver/postgres, without
// cgo), installs that release's schema from its fixture, starts the
// program's workload and runs this build's migrate.Postgres while it
// runs; the program goes on after the upgrade. No call of the old driver
// may fail, and every event must be acked once by each group, with the
// workers' effects written once.
func TestOldDriver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release's driver: not with -short")
	}
	ctx := context.Background()
	src := t.TempDir()
	if err := osexec.Command("git", "-C", "..", "cat-file", "-e", previousRelease+"^{commit}").Run(); err != nil {
		msg := "TestOldDriver needs the git history of release " + previousRelease + " (a full clone, and git): " + err.Error()
		if out, _ := osexec.Command("git", "-C", "..", "rev-parse", "--is-shallow-repository").Output(); strings.TrimSpace(string(out)) == "true" {
			// A shallow clone holds no release to build: a checkout
			// made so on purpose, not a missing dependency.
			t.Skip(msg + " (this clone is shallow: git fetch --unshallow)")
		}
		testskip.Missing(t, "git history", msg)
		return
	}
	archive := osexec.Command("sh", "-c", `git -C .. archive "$0" | tar -x -C "$1"`, previousRelease, src)
	archived, err := archive.CombinedOutput()
	require.NoError(t, err, "git archive %s\n%s", previousRelease, archived)

	// The program's module: the old module in place of this one, its
	// go.sum for the dependencies.
	prog := t.TempDir()
	program, err := os.ReadFile("testdata/olddriver/main.go")
	require.NoError(t, err)
	sum, err := os.ReadFile(filepath.Join(src, "go.sum"))
	require.NoError(t, err)
	gomod := "module olddriver\n\ngo 1.26.0\n\nrequire github.com/rheo-go/rheo v0.0.0\n\nreplace github.com/rheo-go/rheo => " + src + "\n"
	for name, body := range map[string][]byte{"main.go": program, "go.sum": sum, "go.mod": []byte(gomod)} {
		require.NoError(t, os.WriteFile(filepath.Join(prog, name), body, 0o644))
	}
	bin := filepath.Join(prog, "olddriver")
	build := osexec.Command("go", "build", "-o", bin, ".")
	build.Dir = prog
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
	built, err := build.CombinedOutput()
	require.NoError(t, err, "build the program against release %s\n%s", previousRelease, built)

	// The database as that release installed it: a superuser installs,
	// the application's role owns the database and holds rheo_admin.
	fixture := releaseSchema(t, previousRelease)
	app := testdb.NewRole(t, "")
	adminURL := testdb.NewDatabase(t)
	admin := connect(t, adminURL)
	exec(t, admin, "ALTER DATABASE "+pgx.Identifier{admin.Config().Database}.Sanitize()+" OWNER TO "+pgx.Identifier{app}.Sanitize())
	require.NoError(t, pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, string(fixture))
		return err
	}), "install release %s", previousRelease)
	exec(t, admin, "GRANT rheo_admin TO "+pgx.Identifier{app}.Sanitize())

	runCtx, cancel := context.WithTimeout(ctx, 5*time.Minute) // beyond the program's own bound
	defer cancel()
	cmd := osexec.CommandContext(runCtx, bin)
	cmd.Env = append(os.Environ(), "RHEO_URL="+testdb.AsRole(t, adminURL, app))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	var last string
	for lines.Scan() {
		if last = lines.Text(); last == "ready" {
			break
		}
	}
	if last != "ready" {
		_ = cmd.Wait()
		require.FailNow(t, "the program stopped before its workload ran", "%s\n%s", last, stderr.String())
	}

	// The upgrade, while the old driver appends, fetches and acks.
	migrator := connect(t, adminURL)
	assert.NoError(t, migrate.Postgres(ctx, migrator, nil), "upgrade")
	_, err = stdin.Write([]byte("upgraded\n"))
	require.NoError(t, err)
	var r oldReport
	var out []byte
	if lines.Scan() {
		out = lines.Bytes()
	}
	require.NoError(t, json.Unmarshal(out, &r), "the program's report %q\n%s", out, stderr.String())
	if err := cmd.Wait(); !errors.Is(err, context.Canceled) {
		assert.NoError(t, err, "the program\n%s", stderr.String())
	}
	t.Logf("release %s's driver: %d events appended before the upgrade ended, %d in all; %d handled by the workers, %d acked through ack_batch, %d replayed",
		previousRelease, r.AppendedBefore, r.Appended, r.Handled, r.AuditAcked, r.Replayed)

	assert.Empty(t, r.Errors, "release %s's driver", previousRelease)
	var events, effects, distinct int64
	require.NoError(t, admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM rheo.events), (SELECT count(*) FROM effects),
       (SELECT count(DISTINCT e.event_id) FROM effects e JOIN rheo.events v ON v.id::text = e.event_id)`).Scan(&events, &effects, &distinct))
	spanned := fmt.Sprintf("the workload did not span the upgrade: %d events appended before its end, %d in all", r.AppendedBefore, r.Appended)
	assert.NotZero(t, r.AppendedBefore, spanned)
	assert.Greater(t, r.Appended, r.AppendedBefore, spanned)
	counts := fmt.Sprintf("%d events appended, %d in the log, %d handled, %d effects (%d of the log's events); want all equal",
		r.Appended, events, r.Handled, effects, distinct)
	assert.Equal(t, r.Appended, events, counts)
	assert.Equal(t, events, r.Handled, counts)
	assert.Equal(t, events, effects, counts)
	assert.Equal(t, events, distinct, counts)
	assert.True(t, r.Reappended, "re-appending an event of before the upgrade did not return the stored event")
	second := fmt.Sprintf("second group acked %d of %d events, replay made %d due and %d were acked again (want 10); lag %d",
		r.AuditAcked, events, r.Replayed, r.ReplayAcked, r.Lag)
	assert.Equal(t, events, r.AuditAcked, second)
	assert.EqualValues(t, 10, r.Replayed, second)
	assert.EqualValues(t, 10, r.ReplayAcked, second)
	assert.Zero(t, r.Lag, second)
}
