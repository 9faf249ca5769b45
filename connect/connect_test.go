package connect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/drivertest"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/testdb"
)

// pinned is the clock every driver opened here is given.
var pinned = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// pinnedClock stays at pinned.
var pinnedClock = drivertest.ClockAt(pinned)

// useDriver checks that drv works and reads the pinned clock.
func useDriver(t *testing.T, drv driver.Driver) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, drv.CreateStream(ctx, "orders", 2), "CreateStream")
	ev, err := drv.Append(ctx, "orders", json.RawMessage(`{"type":"placed"}`), nil)
	require.NoError(t, err, "Append")
	require.True(t, ev.TS.Equal(pinned), "event ts = %s, want the clock's %s", ev.TS, pinned)
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	sqliteFile := func(t *testing.T) string { return filepath.Join(t.TempDir(), "rheo.db") }
	pgDatabase := func(t *testing.T) string { return testdb.NewDatabase(t) }

	tests := []struct {
		name    string
		url     func(t *testing.T) string
		migrate bool
		// prepare opens the database once with Migrate first.
		prepare bool
		// wantErr is what the error must match; nil means Open succeeds.
		wantErr error
		// wantSchema asks for a *SchemaError inside the error.
		wantSchema bool
	}{
		{name: "a postgres URL with Migrate installs the schema",
			url: pgDatabase, migrate: true},
		{name: "a postgresql URL is accepted",
			url: func(t *testing.T) string {
				return strings.Replace(pgDatabase(t), "postgres://", "postgresql://", 1)
			}, migrate: true},
		{name: "a migrated postgres database opens without Migrate",
			url: pgDatabase, prepare: true},
		{name: "an empty postgres database without Migrate is a schema error",
			url: pgDatabase, wantErr: rheo.ErrFailed, wantSchema: true},
		{name: "a new SQLite file with Migrate is created and installed",
			url: func(t *testing.T) string { return "sqlite://" + sqliteFile(t) }, migrate: true},
		{name: "a migrated SQLite file opens without Migrate",
			url: func(t *testing.T) string { return "sqlite://" + sqliteFile(t) }, prepare: true},
		{name: "an SQLite file without the schema is a schema error",
			url: func(t *testing.T) string {
				path := sqliteFile(t)
				require.NoError(t, os.WriteFile(path, nil, 0o600))
				return "sqlite:" + path
			}, wantErr: rheo.ErrFailed, wantSchema: true},
		{name: "in-memory SQLite with Migrate works",
			url: func(*testing.T) string { return "sqlite::memory:" }, migrate: true},
		{name: "in-memory SQLite without Migrate is a schema error",
			url: func(*testing.T) string { return "sqlite::memory:" }, wantErr: rheo.ErrFailed, wantSchema: true},
		{name: "an unreachable postgres server is backend_unavailable",
			url: func(*testing.T) string {
				return "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
			},
			wantErr: rheo.ErrBackendUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := tt.url(t)
			if tt.prepare {
				drv, err := connect.Open(ctx, url, &connect.Options{Migrate: true})
				require.NoError(t, err, "prepare")
				drv.Close()
			}
			drv, err := connect.Open(ctx, url, &connect.Options{Clock: pinnedClock, Migrate: tt.migrate})
			if tt.wantErr != nil {
				if err == nil {
					drv.Close()
				}
				require.Error(t, err, "Open(%q) succeeded, want %v", url, tt.wantErr)
				require.ErrorIs(t, err, tt.wantErr, "Open(%q) = %v, want %v", url, err, tt.wantErr)
				var schemaErr *connect.SchemaError
				got := errors.As(err, &schemaErr)
				require.Equal(t, tt.wantSchema, got, "Open(%q) = %v; schema error %v, want %v", url, err, got, tt.wantSchema)
				if tt.wantSchema {
					require.Equal(t, rheo.KindSchemaMissing, rheo.KindOf(err), "Open(%q) = %v of kind %q, want schema_missing", url, err, rheo.KindOf(err))
				}
				return
			}
			require.NoError(t, err, "Open(%q)", url)
			defer drv.Close()
			useDriver(t, drv)
		})
	}
}

func TestOpenMissingSQLiteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	_, err := connect.Open(context.Background(), "sqlite://"+path, nil)
	require.ErrorIs(t, err, rheo.ErrBackendUnavailable, "Open = %v, want backend_unavailable naming %s", err, path)
	require.Contains(t, err.Error(), path, "Open = %v, want backend_unavailable naming %s", err, path)
	_, err = os.Stat(path)
	require.True(t, errors.Is(err, os.ErrNotExist), "Open created %s (stat: %v), want it left absent", path, err)
}

func TestOpenRejectsURL(t *testing.T) {
	tests := []struct {
		name string
		url  string
		want string // a fragment of the message
	}{
		{"an empty URL", "", "no database URL given"},
		{"a MySQL URL", "mysql://app:secret@db/app", `unsupported database URL scheme "mysql"`},
		{"a bare path", "/var/lib/rheo.db", "has no scheme"},
		{"an SQLite URL without a file", "sqlite:", "names no database file"},
		{"a postgres URL with a bad port", "postgres://app:secret@db:port/app", "invalid PostgreSQL URL"},
		{"a postgres URL with a bad setting", "postgres://app:secret@db/app?sslmode=sometimes", "sslmode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			drv, err := connect.Open(context.Background(), tt.url, nil)
			if err == nil {
				drv.Close()
			}
			require.Error(t, err, "Open(%q) succeeded, want an error", tt.url)
			var urlErr *connect.URLError
			require.True(t, errors.As(err, &urlErr) && errors.Is(err, rheo.ErrInvalidArgument), "Open(%q) = %v (%T), want a *URLError matching invalid_argument", tt.url, err, err)
			msg := err.Error()
			require.Contains(t, msg, tt.want, "Open(%q) error %q: want it to contain %q and no password", tt.url, msg, tt.want)
			require.NotContains(t, msg, "secret", "Open(%q) error %q: want it to contain %q and no password", tt.url, msg, tt.want)
		})
	}
}

// TestOpenAsApplicationRole opens a migrated PostgreSQL database as login
// roles granted one Rheo role each, as applications connect: the schema
// check needs no more than rheo_reader, and each role can then do its
// part.
func TestOpenAsApplicationRole(t *testing.T) {
	ctx := context.Background()
	roles := map[string]string{}
	for _, granted := range []string{"rheo_reader", "rheo_producer", "rheo_consumer"} {
		roles[granted] = testdb.NewRole(t, "")
	}
	url := testdb.NewDatabase(t)
	admin, err := connect.Open(ctx, url, &connect.Options{Migrate: true})
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, admin.CreateStream(ctx, "orders", 1))
	require.NoError(t, admin.CreateGroup(ctx, "orders", "billing", nil))
	pool, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer pool.Close(ctx)
	for granted, role := range roles {
		_, err := pool.Exec(ctx, "GRANT "+granted+" TO "+pgx.Identifier{role}.Sanitize())
		require.NoError(t, err)
	}

	open := func(t *testing.T, granted string) driver.Driver {
		t.Helper()
		drv, err := connect.Open(ctx, testdb.AsRole(t, url, roles[granted]), nil)
		require.NoError(t, err, "open as a role granted %s", granted)
		t.Cleanup(func() { drv.Close() })
		return drv
	}
	t.Run("rheo_reader reads", func(t *testing.T) {
		_, err := open(t, "rheo_reader").Lag(ctx, "orders", "billing", nil)
		require.NoError(t, err)
	})
	t.Run("rheo_producer appends", func(t *testing.T) {
		_, err := open(t, "rheo_producer").Append(ctx, "orders", json.RawMessage(`{}`), nil)
		require.NoError(t, err)
	})
	t.Run("rheo_consumer fetches and acks", func(t *testing.T) {
		drv := open(t, "rheo_consumer")
		leases, err := drv.Fetch(ctx, "orders", "billing", nil)
		require.NoError(t, err, "fetch")
		require.Len(t, leases, 1, "fetch: %v", leases)
		require.NoError(t, drv.Ack(ctx, leases[0].LeaseID))
	})
	t.Run("rheo_reader may not append", func(t *testing.T) {
		_, err := open(t, "rheo_reader").Append(ctx, "orders", json.RawMessage(`{}`), nil)
		require.ErrorIs(t, err, rheo.ErrFailed, "append as rheo_reader: %v, want failed: … permission denied", err)
		require.Contains(t, err.Error(), "permission denied", "append as rheo_reader: %v, want failed: … permission denied", err)
	})
}

// TestOpenErrorsHidePassword opens URLs that carry a password in each
// form a URL can carry one, at a port where nothing listens or with a
// setting pgx refuses: no error may repeat the password, or a piece of
// it.
func TestOpenErrorsHidePassword(t *testing.T) {
	for _, raw := range []string{
		"postgres://app@127.0.0.1:1/app?password=hunter2",
		"postgres://app@127.0.0.1:1/app?sslpassword=hunter2",
		"postgres://app:hun@ter2@127.0.0.1:1/app",
		"postgres://app:hun%40ter2@127.0.0.1:1/app",
		"postgres://app:hunter2@127.0.0.1:1/app?sslmode=sometimes",
		"postgres://app@127.0.0.1:1/app?password=hunter2&sslmode=sometimes",
		"postgres://app:hun@ter2@127.0.0.1:1/app?sslmode=sometimes",
		"postgres://app:hun/ter2@127.0.0.1:1/app",
	} {
		drv, err := connect.Open(context.Background(), raw, nil)
		if err == nil {
			drv.Close()
		}
		require.Error(t, err, "Open(%q) succeeded, want an error", raw)
		msg := err.Error()
		require.NotContains(t, msg, "hun", "Open(%q) error %q repeats the password", raw, msg)
		require.NotContains(t, msg, "ter2", "Open(%q) error %q repeats the password", raw, msg)
	}
}

func TestOpenPoolOptions(t *testing.T) {
	ctx := context.Background()
	url := testdb.NewDatabase(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	t.Run("the pool settings reach pgx's pool", func(t *testing.T) {
		drv, err := connect.Open(ctx, url, &connect.Options{Migrate: true, Logger: logger,
			MaxConns: 3, MinConns: 1, MaxConnLifetime: time.Hour + time.Minute, MaxConnIdleTime: time.Minute})
		require.NoError(t, err)
		defer drv.Close()
		config := drv.(*postgres.Driver).Pool().Config()
		assert.Equal(t, int32(3), config.MaxConns)
		assert.Equal(t, int32(1), config.MinConns)
		assert.Equal(t, time.Hour+time.Minute, config.MaxConnLifetime)
		assert.Equal(t, time.Minute, config.MaxConnIdleTime)
	})

	t.Run("zero keeps the URL's setting", func(t *testing.T) {
		drv, err := connect.Open(ctx, withParam(url, "pool_max_conns=5"), nil)
		require.NoError(t, err)
		defer drv.Close()
		assert.Equal(t, int32(5), drv.(*postgres.Driver).Pool().Config().MaxConns)
	})

	t.Run("a negative setting is invalid_argument", func(t *testing.T) {
		_, err := connect.Open(ctx, url, &connect.Options{MaxConns: -1})
		assert.ErrorIs(t, err, rheo.ErrInvalidArgument)
	})
}

// withParam adds a query parameter (key=value) to a database URL.
func withParam(url, param string) string {
	if strings.Contains(url, "?") {
		return url + "&" + param
	}
	return url + "?" + param
}

// TestOpenNewerDatabase opens databases that a newer build migrated: one
// that records that this build still works on it opens, one that records
// a newer oldest build is refused with a SchemaError that says to upgrade
// the application.
func TestOpenNewerDatabase(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"postgres", "sqlite"} {
		for _, tt := range []struct {
			name   string
			from   int32 // compatible_from relative to this build's latest
			refuse bool
		}{
			{"that this build still works on opens", 0, false},
			{"that needs a newer build is refused", 1, true},
		} {
			t.Run(kind+" "+tt.name, func(t *testing.T) {
				url := "sqlite://" + filepath.Join(t.TempDir(), "rheo.db")
				table := "rheo_schema_version"
				if kind == "postgres" {
					url, table = testdb.NewDatabase(t), "rheo.schema_version"
				}
				drv, err := connect.Open(ctx, url, &connect.Options{Migrate: true})
				require.NoError(t, err)
				var latest int32
				raw := fmt.Sprintf("UPDATE %s SET version = version + 1, compatible_from = version + %d", table, tt.from)
				if kind == "postgres" {
					pg := drv.(*postgres.Driver)
					if err := pg.Pool().QueryRow(ctx, "SELECT version FROM rheo.schema_version").Scan(&latest); err == nil {
						_, err = pg.Pool().Exec(ctx, raw)
					}
					require.NoError(t, err)
				} else {
					db := drv.(*sqlite.Driver).DB()
					if err := db.QueryRowContext(ctx, "SELECT version FROM rheo_schema_version").Scan(&latest); err == nil {
						_, err = db.ExecContext(ctx, raw)
					}
					require.NoError(t, err)
				}
				drv.Close()

				drv, err = connect.Open(ctx, url, nil)
				if !tt.refuse {
					require.NoError(t, err, "Open")
					drv.Close()
					return
				}
				var schemaErr *connect.SchemaError
				if err == nil {
					drv.Close()
				}
				require.True(t, errors.As(err, &schemaErr) && schemaErr.Applied == latest+1 && schemaErr.CompatibleFrom == latest+1 &&
					strings.Contains(err.Error(), "upgrade the application to a newer build of Rheo"),
					"Open = %v, want a SchemaError at version %d that needs builds of %d", err, latest+1, latest+1)
			})
		}
	}
}

// TestOpenWithRolePrefix migrates with a role prefix: an application
// role granted the prefix's consumer opens the database (connect.Open
// checks the schema with the prefix's reader privileges) and fetches,
// and one granted the default rheo_consumer may not even open it.
func TestOpenWithRolePrefix(t *testing.T) {
	ctx := context.Background()
	prefix := testdb.NewRolePrefix(t)
	mine, foreign := testdb.NewRole(t, ""), testdb.NewRole(t, "")
	url := testdb.NewDatabase(t)
	admin, err := connect.Open(ctx, url, &connect.Options{Migrate: true, RolePrefix: prefix})
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, admin.CreateStream(ctx, "orders", 1))
	require.NoError(t, admin.CreateGroup(ctx, "orders", "billing", nil))
	_, err = admin.Append(ctx, "orders", json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for role, granted := range map[string]string{mine: prefix + "rheo_consumer", foreign: "rheo_consumer"} {
		_, err := conn.Exec(ctx, "GRANT "+pgx.Identifier{granted}.Sanitize()+" TO "+pgx.Identifier{role}.Sanitize())
		require.NoError(t, err)
	}
	drv, err := connect.Open(ctx, testdb.AsRole(t, url, mine), nil)
	require.NoError(t, err, "open as a role granted %srheo_consumer", prefix)
	defer drv.Close()
	leases, err := drv.Fetch(ctx, "orders", "billing", nil)
	require.NoError(t, err, "fetch as a role granted %srheo_consumer", prefix)
	require.Len(t, leases, 1, "fetch as a role granted %srheo_consumer: %v", prefix, leases)
	other, err := connect.Open(ctx, testdb.AsRole(t, url, foreign), nil)
	if err == nil {
		defer other.Close()
		_, err = other.Fetch(ctx, "orders", "billing", nil)
	}
	// Open itself refuses it, as it may not read what is installed; were
	// it let through, the fetch would be denied.
	require.True(t, errors.Is(err, rheo.ErrFailed) &&
		(strings.Contains(err.Error(), "may not act as it") || strings.Contains(err.Error(), "permission denied")),
		"open and fetch as a role granted rheo_consumer: %v, want failed: … may not act as it, or … permission denied", err)
}
