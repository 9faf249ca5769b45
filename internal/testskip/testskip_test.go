package testskip

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// childEnv makes the test binary, run again by the tests below, run
// TestChild: a package whose tests skip for lack of something.
const childEnv = "RHEO_TESTSKIP_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(Run(m))
	}
	os.Exit(m.Run())
}

func TestChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestMissing in a child process")
	}
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			Missing(t, "PostgreSQL", "no PostgreSQL for tests: connection refused; start one")
		})
	}
	t.Run("pgTAP", func(t *testing.T) { Missing(t, "pgTAP", "no pgTAP") })
}

func runChild(t *testing.T, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=1"}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestMissing(t *testing.T) {
	t.Run("a package that skipped ends with one line per missing thing, and is kept out of the test cache", func(t *testing.T) {
		before := time.Now().Add(-time.Second)
		out, err := runChild(t, "CI=")
		require.NoError(t, err, "child:\n%s", out)
		for _, want := range []string{
			"3 test(s) of this package skipped: rheo tests: skipped what needs PostgreSQL (no PostgreSQL for tests: connection refused; start one); go test -v lists the tests, CI=true fails them\n",
			"1 test(s) of this package skipped: rheo tests: skipped what needs pgTAP (no pgTAP); go test -v lists the tests, CI=true fails them\n",
		} {
			assert.Contains(t, out, want, "the child's output")
		}
		info, err := os.Stat(stampPath())
		require.NoError(t, err)
		require.False(t, info.ModTime().Before(before), "the stamp %s is rewritten at the end of the run", stampPath())
	})
	t.Run("under CI=true what is missing fails", func(t *testing.T) {
		out, err := runChild(t, "CI=true")
		require.Error(t, err, "child under CI=true:\n%s", out)
		assert.Contains(t, out, "no PostgreSQL for tests: connection refused; start one")
		assert.NotContains(t, out, "rheo tests: skipped")
	})
	t.Run("of the binaries of one go test command, the first to skip for a thing says it", func(t *testing.T) {
		what := fmt.Sprintf("thing-%d", time.Now().UnixNano())
		require.True(t, firstSay(what), "the first binary says it")
		require.False(t, firstSay(what), "the second does not")
	})
}

// lines is a writer that passes on each write as a line.
type lines chan string

func (l lines) Write(p []byte) (int, error) { l <- string(p); return len(p), nil }
func (l lines) Close() error                { return nil }

func TestSlow(t *testing.T) {
	if testing.Verbose() {
		t.Skip("under -v the tests show themselves as they run, and Slow says nothing")
	}
	out := make(lines, 10)
	stop := slow(10*time.Millisecond, func() (io.WriteCloser, error) { return out, nil })
	var line string
	select {
	case line = <-out:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "Slow wrote nothing")
	}
	assert.Regexp(t, `^rheo tests: \./internal/testskip still running after \d+s \(go test -v \./internal/testskip shows each test as it runs\)\n$`, line)
	// stop returns once the writer has ended, which a full channel would
	// keep from happening.
	go func() {
		for range out {
		}
	}()
	stop()
	close(out)
}
