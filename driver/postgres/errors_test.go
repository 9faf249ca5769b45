package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// sentBefore is an error that happened before anything reached the
// server, as pgconn marks its write failures.
type sentBefore struct{ error }

func (sentBefore) SafeToRetry() bool { return true }

func (e sentBefore) Unwrap() error { return e.error }

// connClosed is the error pgx reports when it finds the connection it
// has just closed after a failed read: marked safe to retry, though the
// request was sent.
type connClosed struct{}

func (connClosed) Error() string     { return "conn closed" }
func (connClosed) SafeToRetry() bool { return true }
func (connClosed) Unwrap() error     { return pgconn.ErrConnClosed }

func TestInterpretError(t *testing.T) {
	t.Parallel()
	netDown := &netError{}
	fatal := func(code string) error {
		return &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code}
	}
	everyEffect := []effect{reads, writesInTx, commits}
	cases := []struct {
		name    string
		err     error
		effects []effect
		want    error
	}{
		{"every Rheo SQLSTATE is its sentinel", &pgconn.PgError{Code: "RH007", Detail: "partition 9"}, everyEffect, rheo.ErrInvalidPartition},
		{"a data exception is invalid_argument", &pgconn.PgError{Code: "22P05"}, everyEffect, rheo.ErrInvalidArgument},
		{"another server error is failed", &pgconn.PgError{Severity: "ERROR", Code: "42883"}, everyEffect, rheo.ErrFailed},
		{"a serialization failure is failed", &pgconn.PgError{Severity: "ERROR", Code: "40001"}, everyEffect, rheo.ErrFailed},
		{"a closed pool is backend_unavailable", puddle.ErrClosedPool, everyEffect, rheo.ErrBackendUnavailable},
		{"a failed connect is backend_unavailable", &pgconn.ConnectError{}, everyEffect, rheo.ErrBackendUnavailable},
		{"a network error before sending is backend_unavailable", sentBefore{netDown}, everyEffect, rheo.ErrBackendUnavailable},
		{"a context error before sending is failed", sentBefore{context.Canceled}, everyEffect, rheo.ErrFailed},
		{"a transaction already closed is failed", pgx.ErrTxClosed, everyEffect, rheo.ErrFailed},
		{"a commit the server rolled back is failed", pgx.ErrTxCommitRollback, everyEffect, rheo.ErrFailed},

		{"a write cut off by its context is ambiguous", fmt.Errorf("timeout: %w", context.DeadlineExceeded), []effect{commits}, rheo.ErrAmbiguous},
		{"a write whose connection broke is ambiguous", fmt.Errorf("receive: %w", io.ErrUnexpectedEOF), []effect{commits}, rheo.ErrAmbiguous},
		{"a write whose network failed is ambiguous", netDown, []effect{commits}, rheo.ErrAmbiguous},
		{"a write that found its connection closed after sending is ambiguous", connClosed{}, []effect{commits}, rheo.ErrAmbiguous},
		{"a write whose session the server ended is ambiguous", fatal("57P01"), []effect{commits}, rheo.ErrAmbiguous},
		{"a write after a server crash is ambiguous", fatal("57P02"), []effect{commits}, rheo.ErrAmbiguous},
		{"a write whose answer could not be read is ambiguous", errors.New("cannot scan"), []effect{commits}, rheo.ErrAmbiguous},

		{"a write in a transaction whose connection broke is failed", io.ErrUnexpectedEOF, []effect{writesInTx}, rheo.ErrFailed},
		{"a write in a transaction cut off by its context is failed", context.DeadlineExceeded, []effect{writesInTx}, rheo.ErrFailed},
		{"a write in a transaction whose session ended is failed", fatal("57P01"), []effect{writesInTx}, rheo.ErrFailed},
		{"a write in a transaction that found its connection closed is failed", connClosed{}, []effect{writesInTx}, rheo.ErrFailed},

		{"a read cut off by its context is failed", context.DeadlineExceeded, []effect{reads}, rheo.ErrFailed},
		{"a read whose connection broke is backend_unavailable", io.EOF, []effect{reads}, rheo.ErrBackendUnavailable},
		{"a read that found its connection closed is backend_unavailable", connClosed{}, []effect{reads}, rheo.ErrBackendUnavailable},
		{"a read whose session the server ended is backend_unavailable", fatal("57P01"), []effect{reads}, rheo.ErrBackendUnavailable},
		{"a connection exception on a read is backend_unavailable", &pgconn.PgError{Code: "08006"}, []effect{reads}, rheo.ErrBackendUnavailable},
		{"anything else on a read is failed", errors.New("cannot scan"), []effect{reads, writesInTx}, rheo.ErrFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, e := range c.effects {
				err := interpretError("op", e, c.err)
				require.ErrorIs(t, err, c.want, "effect %d", e)
				for _, other := range []error{rheo.ErrAmbiguous, rheo.ErrFailed, rheo.ErrBackendUnavailable} {
					if other != c.want {
						require.NotErrorIs(t, err, other, "effect %d", e)
					}
				}
			}
		})
	}

	t.Run("every Rheo SQLSTATE maps to its sentinel", func(t *testing.T) {
		for i := 1; i <= 12; i++ {
			code := fmt.Sprintf("RH%03d", i)
			sentinel := rheo.ErrorForSQLState(code)
			require.NotNil(t, sentinel, code)
			require.ErrorIs(t, interpretError("op", commits, &pgconn.PgError{Code: code}), sentinel, code)
		}
	})

	t.Run("nil is nil", func(t *testing.T) {
		require.NoError(t, interpretError("op", commits, nil))
	})

	t.Run("the detail of a SQL error is kept", func(t *testing.T) {
		err := interpretError("op", commits, &pgconn.PgError{Code: "RH004", Message: "stale_lease", Detail: "lease x is no longer held"})
		require.EqualError(t, err, "stale_lease: lease x is no longer held")
	})

	t.Run("ambiguous and failed errors name the operation and keep the cause", func(t *testing.T) {
		var ambiguous *rheo.AmbiguousError
		require.ErrorAs(t, interpretError("ack", commits, context.Canceled), &ambiguous)
		require.Equal(t, "ack", ambiguous.Op)
		require.ErrorIs(t, ambiguous, context.Canceled)
		var failed *rheo.FailedError
		require.ErrorAs(t, interpretError("lag", reads, context.Canceled), &failed)
		require.Equal(t, "lag", failed.Op)
	})
}

func TestInterpretErrorKinds(t *testing.T) {
	failedPg := func(code, msg string) error {
		return &pgconn.PgError{Severity: "ERROR", Code: code, Message: msg}
	}
	cases := []struct {
		name string
		err  error
		word error
		kind rheo.Kind
	}{
		{"a Rheo role not granted is permission_denied", failedPg("42501", "permission denied for function fetch"), rheo.ErrFailed, rheo.KindPermissionDenied},
		{"a statement_timeout is timeout", failedPg("57014", "canceling statement due to statement timeout"), rheo.ErrFailed, rheo.KindTimeout},
		{"a cancelled statement is canceled", failedPg("57014", "canceling statement due to user request"), rheo.ErrFailed, rheo.KindCanceled},
		{"a serialization failure is serialization", failedPg("40001", "could not serialize access"), rheo.ErrFailed, rheo.KindSerialization},
		{"a deadlock is serialization", failedPg("40P01", "deadlock detected"), rheo.ErrFailed, rheo.KindSerialization},
		{"a lock_timeout is lock_timeout", failedPg("55P03", "canceling statement due to lock timeout"), rheo.ErrFailed, rheo.KindLockTimeout},
		{"a missing function is schema_missing", failedPg("42883", "function rheo.fetch() does not exist"), rheo.ErrFailed, rheo.KindSchemaMissing},
		{"a missing schema is schema_missing", failedPg("3F000", "schema \"rheo\" does not exist"), rheo.ErrFailed, rheo.KindSchemaMissing},
		{"a read-only transaction is read_only", failedPg("25006", "cannot execute INSERT in a read-only transaction"), rheo.ErrFailed, rheo.KindReadOnly},
		{"a full disk is out_of_resources", failedPg("53100", "could not extend file"), rheo.ErrFailed, rheo.KindOutOfResources},
		{"a statement prepared twice is prepared_statements", failedPg("42P05", `prepared statement "stmtcache_1" already exists`), rheo.ErrFailed, rheo.KindPreparedStatements},
		{"a statement prepared elsewhere is prepared_statements", failedPg("26000", `prepared statement "stmtcache_1" does not exist`), rheo.ErrFailed, rheo.KindPreparedStatements},
		{"a context deadline is timeout", sentBefore{context.DeadlineExceeded}, rheo.ErrFailed, rheo.KindTimeout},
		{"a missing database is database_not_found", connectRefusal("3D000", `database "x" does not exist`), rheo.ErrBackendUnavailable, rheo.KindDatabaseNotFound},
		{"a wrong password is authentication_failed", connectRefusal("28P01", `password authentication failed for user "u"`), rheo.ErrBackendUnavailable, rheo.KindAuthenticationFailed},
		{"an unknown role is role_not_found", connectRefusal("28000", `role "u" does not exist`), rheo.ErrBackendUnavailable, rheo.KindRoleNotFound},
		{"a pg_hba.conf refusal is not_admitted", connectRefusal("28000", `no pg_hba.conf entry for host "10.0.0.1"`), rheo.ErrBackendUnavailable, rheo.KindNotAdmitted},
		{"no CONNECT privilege is permission_denied", connectRefusal("42501", `permission denied for database "x"`), rheo.ErrBackendUnavailable, rheo.KindPermissionDenied},
		{"a full server is too_many_connections", connectRefusal("53300", "sorry, too many clients already"), rheo.ErrBackendUnavailable, rheo.KindTooManyConnections},
		{"a server starting up is shutting_down", connectRefusal("57P03", "the database system is starting up"), rheo.ErrBackendUnavailable, rheo.KindShuttingDown},
		{"a connection that broke on a read is connection_lost", io.EOF, rheo.ErrBackendUnavailable, rheo.KindConnectionLost},
		{"a connection refused is no kind", &pgconn.ConnectError{Config: &pgconn.Config{}}, rheo.ErrBackendUnavailable, rheo.KindUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := interpretError("op", reads, c.err)
			require.ErrorIs(t, err, c.word)
			require.Equal(t, c.kind, rheo.KindOf(err))
			var pgErr *pgconn.PgError
			if errors.As(c.err, &pgErr) {
				require.Equal(t, pgErr.Message, rheo.MessageOf(err), "the server's words, without its codes")
			}
		})
	}
}

// connectRefusal is a server's refusal of a connection: a FATAL error.
func connectRefusal(code, msg string) error {
	return fmt.Errorf("connect: %w", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg})
}

type netError struct{}

func (*netError) Error() string   { return "connection reset by peer" }
func (*netError) Timeout() bool   { return false }
func (*netError) Temporary() bool { return false }

func TestArguments(t *testing.T) {
	t.Parallel()
	t.Run("durations round down to milliseconds and stay negative", func(t *testing.T) {
		for d, want := range map[time.Duration]int32{
			0:                       0,
			1500 * time.Microsecond: 1,
			time.Second:             1000,
			-time.Millisecond:       -1,
			-500 * time.Microsecond: -1,
		} {
			got, err := driverutil.Millis("d", d)
			require.NoError(t, err)
			require.Equal(t, want, got, "%s", d)
		}
		_, err := driverutil.Millis("lease duration", 30*24*time.Hour)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
	})

	t.Run("counts beyond int32 are clamped", func(t *testing.T) {
		require.Equal(t, int32(math.MaxInt32), clampInt32(math.MaxInt64))
		require.Equal(t, int32(math.MinInt32), clampInt32(math.MinInt64))
		require.Equal(t, int32(-3), clampInt32(-3))
	})

	t.Run("partitions keep nil apart from empty", func(t *testing.T) {
		require.Nil(t, partitionArray(nil))
		require.Equal(t, []int32{}, partitionArray([]int{}))
		require.Equal(t, []int32{0, 2}, partitionArray([]int{0, 2}))
	})

	t.Run("a lease id that is not a uuid is stale", func(t *testing.T) {
		_, err := leaseIDArg("not-a-uuid")
		require.ErrorIs(t, err, rheo.ErrStaleLease)
		id, err := leaseIDArg("0190A1B2-C3D4-7E5F-8A6B-7C8D9E0F1A2B")
		require.NoError(t, err)
		require.True(t, id.Valid)
	})
}

func TestListenerDropsWhenFull(t *testing.T) {
	t.Parallel()
	l := newListener(nil, nil)
	ch := make(chan driver.Wakeup, wakeupBuffer)
	l.subs["s"] = map[chan driver.Wakeup]struct{}{ch: {}}
	for i := range 2 * wakeupBuffer {
		l.publish(driver.Wakeup{Stream: "s", Sequence: int64(i + 1)})
	}
	l.publish(driver.Wakeup{Stream: "other"})
	require.Len(t, ch, wakeupBuffer)
	require.Equal(t, int64(1), (<-ch).Sequence, "the oldest hints are kept")
}
