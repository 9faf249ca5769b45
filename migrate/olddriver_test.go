package migrate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testskip"
	"github.com/rheo-go/rheo/migrate"
)

// previousRelease is the release before this build, whose Go driver
// must keep working against this build's schema (docs/upgrading.md).
const previousRelease = "d3e0cd0"

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
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", previousRelease, err, out)
	}

	// The program's module: the old module in place of this one, its
	// go.sum for the dependencies.
	prog := t.TempDir()
	program, err := os.ReadFile("testdata/olddriver/main.go")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(src, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	gomod := "module olddriver\n\ngo 1.26.0\n\nrequire github.com/rheo-go/rheo v0.0.0\n\nreplace github.com/rheo-go/rheo => " + src + "\n"
	for name, body := range map[string][]byte{"main.go": program, "go.sum": sum, "go.mod": []byte(gomod)} {
		if err := os.WriteFile(filepath.Join(prog, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(prog, "olddriver")
	build := osexec.Command("go", "build", "-o", bin, ".")
	build.Dir = prog
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the program against release %s: %v\n%s", previousRelease, err, out)
	}

	// The database as that release installed it: a superuser installs,
	// the application's role owns the database and holds rheo_admin.
	fixture := releaseSchema(t, previousRelease)
	app := testdb.NewRole(t, "")
	adminURL := testdb.NewDatabase(t)
	admin := connect(t, adminURL)
	exec(t, admin, "ALTER DATABASE "+pgx.Identifier{admin.Config().Database}.Sanitize()+" OWNER TO "+pgx.Identifier{app}.Sanitize())
	if err := pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, string(fixture))
		return err
	}); err != nil {
		t.Fatalf("install release %s: %v", previousRelease, err)
	}
	exec(t, admin, "GRANT rheo_admin TO "+pgx.Identifier{app}.Sanitize())

	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := osexec.CommandContext(runCtx, bin)
	cmd.Env = append(os.Environ(), "RHEO_URL="+testdb.AsRole(t, adminURL, app))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	var last string
	for lines.Scan() {
		if last = lines.Text(); last == "ready" {
			break
		}
	}
	if last != "ready" {
		_ = cmd.Wait()
		t.Fatalf("the program stopped before its workload ran: %s\n%s", last, stderr.String())
	}

	// The upgrade, while the old driver appends, fetches and acks.
	migrator := connect(t, adminURL)
	if err := migrate.Postgres(ctx, migrator, nil); err != nil {
		t.Errorf("upgrade: %v", err)
	}
	if _, err := stdin.Write([]byte("upgraded\n")); err != nil {
		t.Fatal(err)
	}
	var r oldReport
	var out []byte
	if lines.Scan() {
		out = lines.Bytes()
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("the program's report %q: %v\n%s", out, err, stderr.String())
	}
	if err := cmd.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("the program: %v\n%s", err, stderr.String())
	}
	t.Logf("release %s's driver: %d events appended before the upgrade ended, %d in all; %d handled by the workers, %d acked through ack_batch, %d replayed",
		previousRelease, r.AppendedBefore, r.Appended, r.Handled, r.AuditAcked, r.Replayed)

	for _, e := range r.Errors {
		t.Errorf("release %s's driver: %s", previousRelease, e)
	}
	var events, effects, distinct int64
	if err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM rheo.events), (SELECT count(*) FROM effects),
       (SELECT count(DISTINCT e.event_id) FROM effects e JOIN rheo.events v ON v.id::text = e.event_id)`).Scan(&events, &effects, &distinct); err != nil {
		t.Fatal(err)
	}
	if r.AppendedBefore == 0 || r.Appended <= r.AppendedBefore {
		t.Errorf("the workload did not span the upgrade: %d events appended before its end, %d in all", r.AppendedBefore, r.Appended)
	}
	if events != r.Appended || r.Handled != events || effects != events || distinct != events {
		t.Errorf("%d events appended, %d in the log, %d handled, %d effects (%d of the log's events); want all equal",
			r.Appended, events, r.Handled, effects, distinct)
	}
	if !r.Reappended {
		t.Error("re-appending an event of before the upgrade did not return the stored event")
	}
	if r.AuditAcked != events || r.Replayed != 10 || r.ReplayAcked != 10 || r.Lag != 0 {
		t.Errorf("second group acked %d of %d events, replay made %d due and %d were acked again (want 10); lag %d",
			r.AuditAcked, events, r.Replayed, r.ReplayAcked, r.Lag)
	}
}
