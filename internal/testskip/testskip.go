// Package testskip skips the tests that need what the machine lacks
// (PostgreSQL, pgTAP, PgBouncer, Chromium, psql), or fails them under
// CI=true, and makes those skips visible without -v.
//
// go test ./... prints, for a package that passes, its "ok" line and
// nothing of what its tests wrote: a skip message is seen only under -v.
// So Run, the body of a package's TestMain, ends a run in which tests
// were skipped for lack of something with one line per missing thing:
//
//	rheo tests: skipped what needs PostgreSQL (no PostgreSQL for tests: …; set RHEO_TEST_DATABASE_URL=postgres://… or …); go test -v lists the tests, CI=true fails them
//
// written to the terminal (/dev/tty), which go test does not capture,
// once per go test command for each missing thing (the first package to
// skip for it says it; the others stay quiet), or to stderr when the
// test binary runs on its own or under -v. And a run that skipped is not
// cached: the next go test runs the package again, says it again, and
// runs the tests for real once what was missing is there.
package testskip

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	mu sync.Mutex
	// skipped counts the tests skipped per missing thing; why is the
	// first message for it.
	skipped = map[string]int{}
	why     = map[string]string{}
)

// Missing skips t because what (such as "PostgreSQL") is not available,
// with msg saying why and how to provide it; under CI=true, where
// everything must be there, it fails t instead.
func Missing(t testing.TB, what, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		require.FailNow(t, msg)
	}
	mu.Lock()
	skipped[what]++
	if _, ok := why[what]; !ok {
		why[what] = msg
	}
	mu.Unlock()
	// Opened during the run, the stamp becomes an input of the cached
	// result; rewritten as the run ends (see Run), it is too new for
	// go test to cache the result.
	if f, err := os.Open(stampPath()); err == nil {
		f.Close()
	}
	t.Skip(msg)
}

// Runner is what TestMain runs: a *testing.M.
type Runner interface {
	Run() int
}

// Run runs the package's tests and reports what was skipped for lack of
// something; it returns m's exit code. A TestMain of its own is
//
//	func TestMain(m *testing.M) { os.Exit(testskip.Run(m)) }
//
// and with goleak: goleak.VerifyTestMain(testskip.Wrap(m)).
//
// A package whose tests run longer than SlowAfter says so on the
// terminal every SlowAfter while it runs, as go test shows nothing of a
// package until it ends (see Slow).
func Run(m Runner) int {
	stop := Slow(SlowAfter)
	code := m.Run()
	stop()
	report()
	mu.Lock()
	fns := atExit
	atExit = nil
	mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
	return code
}

// atExit are the functions Run calls once the tests have run.
var atExit []func()

// AtExit has Run call f once the package's tests have run, in the
// reverse order of the calls to AtExit, for what the whole test binary
// shares (such as a template database). A test binary whose TestMain
// does not call Run leaves f uncalled.
func AtExit(f func()) {
	mu.Lock()
	defer mu.Unlock()
	atExit = append(atExit, f)
}

// Wrap returns m with Run reporting the skips, for test mains that take a
// Runner, such as goleak.VerifyTestMain.
func Wrap(m Runner) Runner { return wrapped{m} }

type wrapped struct{ m Runner }

func (w wrapped) Run() int { return Run(w.m) }

func report() {
	mu.Lock()
	defer mu.Unlock()
	if len(skipped) == 0 {
		return
	}
	_ = os.WriteFile(stampPath(), []byte(time.Now().Format(time.RFC3339Nano)+"\n"), 0o644)
	whats := make([]string, 0, len(skipped))
	for what := range skipped {
		whats = append(whats, what)
	}
	slices.Sort(whats)
	for _, what := range whats {
		line := fmt.Sprintf("rheo tests: skipped what needs %s (%s); go test -v lists the tests, CI=true fails them\n",
			what, strings.Join(strings.Fields(why[what]), " "))
		if testing.Verbose() || !underGoTest() {
			fmt.Fprintf(os.Stderr, "%d test(s) of this package skipped: %s", skipped[what], line)
			continue
		}
		if firstSay(what) {
			if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
				_, _ = io.WriteString(tty, line)
				tty.Close()
			}
		}
		fmt.Fprint(os.Stderr, line) // in go test's output of a failing run
	}
}

// SlowAfter is how long a package's tests run before Run says that they
// still run.
const SlowAfter = 30 * time.Second

// Slow writes, every interval until the returned function is called, a
// line naming the package whose tests still run:
//
//	rheo tests: ./tests/go still running after 1m0s (go test -v ./tests/go shows each test as it runs)
//
// to the terminal, which go test does not capture (nothing when there
// is none, or under -v, which shows the tests as they run). The
// function returns once the writer has stopped.
func Slow(interval time.Duration) (stop func()) {
	return slow(interval, func() (io.WriteCloser, error) { return os.OpenFile("/dev/tty", os.O_WRONLY, 0) })
}

// slow is Slow writing to what open opens for each line.
func slow(interval time.Duration, open func() (io.WriteCloser, error)) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		start := time.Now()
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				if testing.Verbose() {
					continue
				}
				w, err := open()
				if err != nil {
					continue
				}
				pkg := packageDir()
				fmt.Fprintf(w, "rheo tests: %s still running after %s (go test -v %s shows each test as it runs)\n",
					pkg, time.Since(start).Round(time.Second), pkg)
				w.Close()
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

// packageDir is the directory of the package under test (go test runs
// its binary there) relative to the module's root, as ./dir.
func packageDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return "a package"
	}
	rel, err := filepath.Rel(filepath.Dir(stampPath()), dir)
	switch {
	case err != nil || strings.HasPrefix(rel, ".."):
		return dir
	case rel == ".":
		return "."
	default:
		return "./" + filepath.ToSlash(rel)
	}
}

// underGoTest reports whether go test runs the binary: it always sets
// -test.paniconexit0.
func underGoTest() bool {
	f := flag.Lookup("test.paniconexit0")
	return f != nil && f.Value.String() == "true"
}

// firstSay reports whether this test binary is the first of its go test
// command (the go command is the binary's parent) to report what.
func firstSay(what string) bool {
	dir := filepath.Join(os.TempDir(), "rheo-test-skips")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return true
	}
	// Markers of earlier go test commands are of no use after a day.
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	name := fmt.Sprintf("%d-%s", os.Getppid(), strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, what))
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		return false
	}
	if err == nil {
		f.Close()
	}
	return true
}

// stampPath is the file that keeps a run with skips out of go test's
// cache. go test looks only at the files under the module's root, so it
// lives there, at the top (.gitignore lists it).
func stampPath() string {
	stampOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				stamp = filepath.Join(dir, ".rheo-test-skips")
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				return
			}
			dir = parent
		}
	})
	return stamp
}

var (
	stampOnce sync.Once
	stamp     = filepath.Join(os.TempDir(), ".rheo-test-skips")
)
