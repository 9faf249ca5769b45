package worker_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/internal/testbackend"
	"github.com/rheo-go/rheo/internal/workertest"
)

// waitTimeout bounds every wait for something the test expects to happen.
const waitTimeout = workertest.WaitTimeout

// openPostgres opens a PostgreSQL driver on dsn, closed when t ends: for
// a database reached other than as its backend opens it, such as through
// a fault proxy.
func openPostgres(t testing.TB, dsn string, clock driver.Clock) driver.Driver {
	t.Helper()
	d, err := postgres.Open(context.Background(), dsn, &postgres.Options{Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// streamSeq makes stream names unique within a test binary run.
var streamSeq atomic.Int64

// newStream creates a stream with a group on drv and returns their names.
func newStream(t testing.TB, drv driver.Driver, partitions, maxAttempts int) (stream, group string) {
	t.Helper()
	ctx := context.Background()
	stream = fmt.Sprintf("s%d", streamSeq.Add(1))
	group = "g"
	require.NoError(t, drv.CreateStream(ctx, stream, partitions))
	require.NoError(t, drv.CreateGroup(ctx, stream, group, &rheo.CreateGroupOptions{MaxAttempts: maxAttempts}))
	return stream, group
}

// appendN appends n events {"n": i} (i from 0) to partition 0 of stream
// and returns them.
func appendN(t testing.TB, drv driver.Driver, stream string, n int) []rheo.Event {
	t.Helper()
	items := make([]rheo.BatchItem, n)
	for i := range items {
		items[i] = rheo.BatchItem{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
	}
	var events []rheo.Event
	for len(items) > 0 {
		k := min(len(items), 1000)
		got, err := drv.AppendBatch(context.Background(), stream, items[:k], nil)
		require.NoError(t, err)
		events = append(events, got...)
		items = items[k:]
	}
	return events
}

// appendSpread appends n events routed by distinct keys over the stream's
// partitions.
func appendSpread(t testing.TB, drv driver.Driver, stream string, n int) []rheo.Event {
	t.Helper()
	var events []rheo.Event
	for start := 0; start < n; start += 1000 {
		items := make([]rheo.BatchItem, min(1000, n-start))
		for i := range items {
			items[i] = rheo.BatchItem{Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, start+i)), Key: fmt.Sprintf("k%d", start+i)}
		}
		got, err := drv.AppendBatch(context.Background(), stream, items, nil)
		require.NoError(t, err)
		events = append(events, got...)
	}
	return events
}

func groupInfo(t testing.TB, drv driver.Driver, stream, group string) rheo.GroupInfo {
	t.Helper()
	info, err := drv.GroupInfo(context.Background(), stream, group)
	require.NoError(t, err)
	return info
}

// eventually waits until cond holds, checking every few milliseconds,
// for at most waitTimeout.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		require.False(t, time.Now().After(deadline), "timed out waiting until %s", what)
		time.Sleep(5 * time.Millisecond)
	}
}

// progressing waits until step reports done, checking every few
// milliseconds. It fails when step's progress (a count of what happened
// so far) stands still for waitTimeout: a loaded machine that is slow
// but moving is given the time it needs, a stalled one is not.
func progressing(t testing.TB, what string, step func() (progress int, done bool)) {
	t.Helper()
	last, deadline := -1, time.Now()
	for {
		progress, done := step()
		if done {
			return
		}
		if progress != last {
			last, deadline = progress, time.Now().Add(waitTimeout)
		}
		require.False(t, time.Now().After(deadline), "timed out waiting until %s: no progress for %s", what, waitTimeout)
		time.Sleep(5 * time.Millisecond)
	}
}

// receiveOK waits for a value from ch, or for ch to be closed (ok false).
func receiveOK[T any](t testing.TB, what string, ch <-chan T) (v T, ok bool) {
	t.Helper()
	select {
	case v, ok = <-ch:
		return v, ok
	case <-time.After(waitTimeout):
		require.FailNow(t, fmt.Sprintf("timed out waiting for %s", what))
		panic("unreachable")
	}
}

// recorder is the hook recorder of workertest, and recorded what it was
// told.
type (
	recorder = workertest.Recorder
	recorded = workertest.Recorded
)

// sideTable is a table of the host's that transactional handlers write.
func createSideTable(t testing.TB, drv driver.Driver) {
	t.Helper()
	require.NoError(t, drv.(driver.Transactor).InTx(context.Background(), func(ctx context.Context, tx driver.Tx) error {
		return execTx(ctx, tx, "CREATE TABLE IF NOT EXISTS side (event_id text NOT NULL)")
	}))
}

// execTx runs a statement in a host transaction of either kind.
func execTx(ctx context.Context, tx driver.Tx, query string, args ...any) error {
	switch native := tx.Native().(type) {
	case pgx.Tx:
		_, err := native.Exec(ctx, query, args...)
		return err
	case *sql.Tx:
		_, err := native.ExecContext(ctx, query, args...)
		return err
	default:
		return fmt.Errorf("unknown transaction type %T", native)
	}
}

// sideRows counts the side table's rows for an event.
func sideRows(t testing.TB, b *testbackend.Backend, drv driver.Driver, eventID string) int {
	t.Helper()
	var n int
	query := "SELECT count(*) FROM side WHERE event_id = " + b.Placeholder
	require.NoError(t, drv.(driver.Transactor).InTx(context.Background(), func(ctx context.Context, tx driver.Tx) error {
		switch native := tx.Native().(type) {
		case pgx.Tx:
			return native.QueryRow(ctx, query, eventID).Scan(&n)
		case *sql.Tx:
			return native.QueryRowContext(ctx, query, eventID).Scan(&n)
		default:
			return fmt.Errorf("unknown transaction type %T", native)
		}
	}))
	return n
}
