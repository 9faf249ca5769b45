// Package testdb gives tests a PostgreSQL database of their own.
//
// The server is found through RHEO_TEST_DATABASE_URL, else the local
// server at 127.0.0.1:5432, else a testcontainers-go container when a
// Docker engine answers. When none is found the test is skipped with a
// message saying how to enable it, except under CI=true, where it fails
// (package testskip, whose Run reports the skips of a package).
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/rheo-go/rheo/internal/testskip"
)

// EnvURL names the variable that points tests at a PostgreSQL server.
const EnvURL = "RHEO_TEST_DATABASE_URL"

const localURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
)

// ServerURL returns the URL of a reachable PostgreSQL server (connected to
// an administrative database), or skips or fails t as described in the
// package documentation.
func ServerURL(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() { serverURL, serverErr = findServer() })
	if serverErr != nil {
		testskip.Missing(t, "PostgreSQL", fmt.Sprintf("no PostgreSQL for tests: %v; set %s=postgres://… or start PostgreSQL on 127.0.0.1:5432", serverErr, EnvURL))
	}
	return serverURL
}

func findServer() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		if err := ping(u); err != nil {
			return "", fmt.Errorf("%s is set but unreachable: %v", EnvURL, RootCause(err))
		}
		return u, nil
	}
	local := ping(localURL)
	if local == nil {
		return localURL, nil
	}
	u, err := startContainer()
	if err != nil {
		return "", fmt.Errorf("none at 127.0.0.1:5432 (%v), and %w", RootCause(local), err)
	}
	return u, nil
}

// RootCause is the innermost error of err's chain, such as "connection
// refused", without pgx's account of every address it tried.
func RootCause(err error) error {
	for {
		var next error
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			next = e.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := e.Unwrap(); len(errs) > 0 {
				next = errs[0]
			}
		}
		if next == nil {
			return err
		}
		err = next
	}
}

func ping(u string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// startContainer runs PostgreSQL in a container; it lives until the test
// binary exits (testcontainers' reaper removes it).
func startContainer() (u string, err error) {
	defer func() {
		// testcontainers panics when no Docker engine is configured.
		if r := recover(); r != nil {
			err = fmt.Errorf("no Docker engine for a container: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, derr := testcontainers.NewDockerClientWithOpts(ctx); derr != nil {
		return "", fmt.Errorf("no Docker engine for a container: %v", RootCause(derr))
	}
	c, err := tcpostgres.Run(ctx, "postgres:15", tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"), tcpostgres.BasicWaitStrategies())
	if err != nil {
		return "", fmt.Errorf("the PostgreSQL container did not start: %w", err)
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}

// NewDatabase creates an empty database for t and drops it when t ends.
// It returns the database's URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return NewDatabaseFrom(t, "")
}

// NewDatabaseFrom creates a database for t as a copy of the database
// named template (empty: PostgreSQL's template1), and drops it when t
// ends. It returns the database's URL.
func NewDatabaseFrom(t testing.TB, template string) string {
	t.Helper()
	admin := ServerURL(t)
	ctx := context.Background()
	var name string
	var err error
	if template == "" {
		name, err = CreateDatabase(ctx, admin, "rheo_test_")
	} else {
		name, err = CreateDatabase(ctx, admin, "rheo_test_", "TEMPLATE "+pgx.Identifier{template}.Sanitize())
	}
	require.NoError(t, err, "create test database")
	t.Cleanup(func() {
		assert.NoError(t, DropDatabase(context.WithoutCancel(ctx), admin, name), "drop test database")
	})
	return WithDatabase(t, admin, name)
}

// CreateDatabase creates a database named prefix and a random suffix on
// the server at admin, with the options of CREATE DATABASE given, and
// returns its name.
func CreateDatabase(ctx context.Context, admin, prefix string, options ...string) (string, error) {
	name := prefix + randomSuffix()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to the test server: %w", err)
	}
	defer conn.Close(ctx)
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	for _, o := range options {
		stmt += " " + o
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return "", err
	}
	return name, nil
}

// DropDatabase drops the database name of the server at admin, closing
// the connections left to it.
func DropDatabase(ctx context.Context, admin, name string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to the test server: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// WithDatabase returns serverURL pointed at database name.
func WithDatabase(t testing.TB, serverURL, name string) string {
	t.Helper()
	u, err := url.Parse(serverURL)
	require.NoError(t, err, "parse server URL")
	u.Path = "/" + name
	return u.String()
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewRole creates a login role for t with the given extra attributes
// (such as "CREATEROLE"), and drops it when t ends, with the membership
// grants and the databases' ownership it holds then. Create it before the
// databases it is to own objects in: those are dropped first, as cleanups
// run in the reverse order of their registration.
func NewRole(t testing.TB, attributes string) string {
	t.Helper()
	admin := ServerURL(t)
	name := "rheo_test_role_" + randomSuffix()
	ctx := context.Background()
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	ident := pgx.Identifier{name}.Sanitize()
	require.NoError(t, exec("CREATE ROLE "+ident+" LOGIN "+attributes), "create test role")
	t.Cleanup(func() {
		err := exec("REASSIGN OWNED BY " + ident + " TO CURRENT_USER; DROP OWNED BY " + ident + "; DROP ROLE " + ident)
		assert.NoErrorf(t, err, "drop test role %s", name)
	})
	return name
}

// AsRole returns databaseURL with its user replaced by role (the server
// trusts local connections, as the test server does).
func AsRole(t testing.TB, databaseURL, role string) string {
	t.Helper()
	u, err := url.Parse(databaseURL)
	require.NoError(t, err, "parse database URL")
	u.User = url.User(role)
	return u.String()
}

// NewRolePrefix returns a role prefix (migrate.Options.RolePrefix) of
// t's own, and drops the roles of that prefix when t ends. Call it
// before creating the databases the prefix is installed in: those are
// dropped first, as cleanups run in the reverse order of their
// registration, and then the roles own nothing.
func NewRolePrefix(t testing.TB) string {
	t.Helper()
	admin := ServerURL(t)
	prefix := "rheo_test_" + randomSuffix() + "_"
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, admin)
		if !assert.NoErrorf(t, err, "drop the roles of prefix %s", prefix) {
			return
		}
		defer conn.Close(ctx)
		for _, role := range []string{"rheo_admin", "rheo_producer", "rheo_consumer", "rheo_reader", "rheo_owner"} {
			_, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{prefix + role}.Sanitize())
			assert.NoErrorf(t, err, "drop the roles of prefix %s", prefix)
		}
	})
	return prefix
}
