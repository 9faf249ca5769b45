package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/cmd/rheo/cli"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/faultproxy"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cliBatchFault wraps a driver so that a test decides what each
// AppendBatch call does: call n (from 1) runs fault(n, commit), where
// commit runs the real AppendBatch.
type cliBatchFault struct {
	driver.Driver
	calls int
	fault func(n int, commit func() ([]rheo.Event, error)) ([]rheo.Event, error)
}

func (d *cliBatchFault) AppendBatch(ctx context.Context, stream string, items []rheo.BatchItem, opts *rheo.AppendBatchOptions) ([]rheo.Event, error) {
	d.calls++
	return d.fault(d.calls, func() ([]rheo.Event, error) { return d.Driver.AppendBatch(ctx, stream, items, opts) })
}

// runFaulty runs rheo with stdin against the backend, its AppendBatch
// calls going through fault, and the context that cancel ends.
func (b *cliBackend) runFaulty(t *testing.T, ctx context.Context, stdin string,
	fault func(n int, commit func() ([]rheo.Event, error)) ([]rheo.Event, error), args ...string) cliResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.RunWith(ctx, append(args, "--database-url", b.url), strings.NewReader(stdin), &stdout, &stderr, &cli.Options{
		WrapDriver: func(drv driver.Driver) driver.Driver { return &cliBatchFault{Driver: drv, fault: fault} },
	})
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// cliNumberedLines returns lines from..to of a JSON lines input whose
// line i is {"n": i}.
func cliNumberedLines(from, to int) string {
	var in strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&in, "{\"n\":%d}\n", i)
	}
	return in.String()
}

// cliNumbers returns the "n" of every event of stream, sorted.
func (b *cliBackend) cliNumbers(t *testing.T, stream string) []int {
	t.Helper()
	var ns []int
	for ev, err := range driver.QueryAll(context.Background(), b.drv, stream, rheo.Query{MaxCount: 1000}) {
		require.NoError(t, err)
		var p struct{ N int }
		require.NoError(t, json.Unmarshal(ev.Payload, &p))
		ns = append(ns, p.N)
	}
	slices.Sort(ns)
	return ns
}

// wantNumbers checks that stream holds exactly the lines 1..n, once each.
func (b *cliBackend) wantNumbers(t *testing.T, stream string, n int) {
	t.Helper()
	got := b.cliNumbers(t, stream)
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	require.Equal(t, want, got, "stream %s holds %d events (%v…), want lines 1 to %d once each", stream, len(got), got[:min(len(got), 5)], n)
}

func TestCLIAppendFailures(t *testing.T) {
	t.Parallel()
	const lines = 1203 // batches of lines 1-500, 501-1000, 1001-1203
	input := cliNumberedLines(1, lines)
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		ctx := context.Background()
		stream := 0
		newStream := func(t *testing.T) string {
			t.Helper()
			stream++
			name := fmt.Sprintf("lines-%d", stream)
			b.cliStream(t, name, 2, 5)
			return name
		}
		// resume appends the input from line from on, as tail -n +from
		// would, and checks that the stream then holds every line once.
		resume := func(t *testing.T, s string, from int) {
			t.Helper()
			r := cliRun(t, cliNumberedLines(from, lines), "append", s, "--database-url", b.url)
			require.Equal(t, cli.ExitOK, r.code, "resume from line %d: %s", from, r)
			b.wantNumbers(t, s, lines)
		}

		t.Run("a batch whose commit is ambiguous is named by its lines, and the resume line for either outcome", func(t *testing.T) {
			for _, committed := range []bool{true, false} {
				s := newStream(t)
				r := b.runFaulty(t, ctx, input, func(n int, commit func() ([]rheo.Event, error)) ([]rheo.Event, error) {
					if n != 2 {
						return commit()
					}
					if committed {
						_, err := commit()
						assert.NoError(t, err, "commit the second batch")
					}
					return nil, &rheo.AmbiguousError{Op: "append_batch", Err: io.ErrUnexpectedEOF}
				}, "append", s)
				cliWantFailure(t, r, cli.ExitFailure, "rheo: whether the batch of stdin lines 501 to 1000 (500 events) was appended is unknown: "+
					"the connection to the database was lost before it answered; before it, 500 events appended (stdin lines 1 to 500); "+
					"that batch is appended whole or not at all: if it was, resume from line 1001, else from line 501 "+
					"(see the stream's latest events with: rheo tail "+s+")\n")
				if committed {
					b.wantNumbers(t, s, 1000)
					resume(t, s, 1001)
				} else {
					b.wantNumbers(t, s, 500)
					resume(t, s, 501)
				}
			}
		})
		t.Run("a batch that failed says what is appended and the line to resume from", func(t *testing.T) {
			s := newStream(t)
			r := b.runFaulty(t, ctx, input, func(n int, commit func() ([]rheo.Event, error)) ([]rheo.Event, error) {
				if n == 3 {
					return nil, &rheo.FailedError{Op: "append_batch", Err: errors.New("disk full")}
				}
				return commit()
			}, "append", s)
			cliWantFailure(t, r, cli.ExitFailure, "rheo: the batch of stdin lines 1001 to 1203 was not appended: append_batch failed: disk full; "+
				"1000 events appended (stdin lines 1 to 1000), none from line 1001 on; resume from line 1001\n")
			b.wantNumbers(t, s, 1000)
			resume(t, s, 1001)
		})
		t.Run("an interrupt says what is appended and the line to resume from", func(t *testing.T) {
			s := newStream(t)
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			r := b.runFaulty(t, runCtx, input, func(n int, commit func() ([]rheo.Event, error)) ([]rheo.Event, error) {
				if n == 2 {
					cancel() // SIGINT as the second batch is sent
				}
				return commit()
			}, "append", s)
			cliWantFailure(t, r, cli.ExitFailure,
				"rheo: interrupted; 500 events appended (stdin lines 1 to 500), none from line 501 on; resume from line 501\n")
			b.wantNumbers(t, s, 500)
			resume(t, s, 501)
		})
		t.Run("a line that is not a JSON object is named by its line number, after the lines before it", func(t *testing.T) {
			s := newStream(t)
			r := cliRun(t, "{\"n\":1}\n\n{\"n\":3}\n[4]\n{\"n\":5}\n", "append", s, "--database-url", b.url)
			cliWantFailure(t, r, cli.ExitFailure, "rheo: stdin line 4 is a JSON array, not a JSON object; "+
				"2 events appended (stdin lines 1 to 3), none from line 4 on; resume from line 4 once it is fixed\n")
			for in, want := range map[string]string{
				"\"text\"\n": "stdin line 1 is a JSON string, not a JSON object; nothing was appended; resume from line 1 once it is fixed",
				"{}\n42\n":   "stdin line 2 is a JSON number, not a JSON object",
				"{}\nnull\n": "stdin line 2 is JSON null, not a JSON object",
				"{}\n{\"a\":\"\\u0000\"}\n": "stdin line 2 contains \\u0000, which cannot be stored; 1 event appended (stdin line 1), " +
					"none from line 2 on; resume from line 2 once it is fixed",
			} {
				cliWantFailure(t, cliRun(t, in, "append", s, "--database-url", b.url), cli.ExitFailure, want)
			}
		})
		t.Run("a line the database refuses is named by its line number, after the lines before it", func(t *testing.T) {
			s := newStream(t)
			long := strings.Repeat("k", 2000)
			in := cliNumberedLines(1, 700) + `{"n":701,"key":"` + long + "\"}\n" + cliNumberedLines(702, 800)
			r := cliRun(t, in, "append", s, "--database-url", b.url)
			cliWantFailure(t, r, cli.ExitFailure, "rheo: the payload key of stdin line 701 must be at most 1024 bytes, got 2000 bytes; "+
				"700 events appended (stdin lines 1 to 700), none from line 701 on; resume from line 701 once it is fixed\n")
			b.wantNumbers(t, s, 700)
		})
		t.Run("a line longer than the limit is named with the limit", func(t *testing.T) {
			s := newStream(t)
			in := "{\"n\":1}\n{\"n\":\"" + strings.Repeat("x", 17<<20) + "\"}\n{\"n\":3}\n"
			r := cliRun(t, in, "append", s, "--database-url", b.url)
			cliWantFailure(t, r, cli.ExitFailure, "rheo: stdin line 2 is longer than the limit of 16777216 bytes (16 MiB) per line; "+
				"1 event appended (stdin line 1), none from line 2 on; resume from line 2 once it is fixed\n")
			b.wantNumbers(t, s, 1)
		})
		t.Run("a flag the database refuses is a usage error that still says what was appended", func(t *testing.T) {
			s := newStream(t)
			r := cliRun(t, input, "append", s, "--partition", "7", "--database-url", b.url)
			cliWantFailure(t, r, cli.ExitUsage, "rheo append: the batch of stdin lines 1 to 500 was not appended: invalid_partition: "+
				"partition 7 is outside 0..1; nothing was appended; resume from line 1\nusage: rheo append STREAM")
		})
		t.Run("stdin at /dev/null is not a terminal: no Ctrl-D prompt", func(t *testing.T) {
			s := newStream(t)
			devNull, err := os.Open(os.DevNull)
			require.NoError(t, err)
			defer devNull.Close()
			var stdout, stderr bytes.Buffer
			code := cli.Run(ctx, []string{"append", s, "--database-url", b.url, "--output", "json"}, devNull, &stdout, &stderr)
			msg := fmt.Sprintf("append < /dev/null: exit %d, stdout %q, stderr %q; want nothing appended and nothing on stderr",
				code, stdout.String(), stderr.String())
			require.Equal(t, cli.ExitOK, code, msg)
			require.Empty(t, stderr.String(), msg)
			require.Equal(t, float64(0), cliJSON[map[string]any](t, stdout.String())["appended"], msg)
		})
	})
	t.Run("postgres: a commit whose answer the network lost is ambiguous, with the real driver", func(t *testing.T) {
		b := cliOpen(t, testbackend.PostgresURL(t), false)
		b.cliStream(t, "cut", 2, 5)
		u, err := url.Parse(b.url)
		require.NoError(t, err)
		proxy := faultproxy.New(t, u.Host)
		var batches atomic.Int32
		fired := proxy.Arm(faultproxy.CutAfterSend, func(statement string) bool {
			return strings.Contains(statement, "append_batch") && batches.Add(1) == 2
		})
		r := cliRun(t, input, "append", "cut", "--database-url", proxy.URL(t, b.url))
		<-fired.Fired()
		cliWantFailure(t, r, cli.ExitFailure, "rheo: whether the batch of stdin lines 501 to 1000 (500 events) was appended is unknown: "+
			"the connection to the database was lost before it answered; before it, 500 events appended (stdin lines 1 to 500); "+
			"that batch is appended whole or not at all: if it was, resume from line 1001, else from line 501")
		b.wantNumbers(t, "cut", 1000) // the server had committed it
	})
}
