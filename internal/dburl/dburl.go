// Package dburl turns the database URLs that Rheo's commands accept into a
// connection target: a PostgreSQL connection string, or an SQLite file or
// in-memory database.
package dburl

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Kind is the database a URL points at.
type Kind int

const (
	// Postgres is a PostgreSQL server.
	Postgres Kind = iota + 1
	// SQLite is an SQLite database file or an in-memory database.
	SQLite
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Postgres:
		return "PostgreSQL"
	case SQLite:
		return "SQLite"
	default:
		return fmt.Sprintf("Kind(%d)", int(k))
	}
}

// Forms lists the accepted URL forms, for usage texts and error messages.
const Forms = "postgres://…, postgresql://…, sqlite:///abs/path.db, " +
	"sqlite://relative/path.db, sqlite:relative.db, sqlite::memory:"

// Target is a parsed database URL.
type Target struct {
	// Kind is the database the URL points at.
	Kind Kind
	// DSN is the PostgreSQL connection string (the URL, with its scheme in
	// lower case); "" for SQLite.
	DSN string
	// Path is the SQLite database file as given (absolute or relative to
	// the working directory); "" for PostgreSQL and in-memory SQLite.
	Path string
	// Memory reports an in-memory SQLite database.
	Memory bool
}

// SQLiteDSN is the data source name of the SQLite target, without
// connection settings, which differ between SQLite drivers: give it to
// driver/sqlite's Open, which adds WAL, a busy timeout and IMMEDIATE
// transactions in the form of the driver it opens. An in-memory database
// lives as long as its connection, so a pool opened on it must keep
// exactly one connection (SetMaxOpenConns(1)), as Open's does.
func (t Target) SQLiteDSN() string {
	if t.Memory {
		return ":memory:"
	}
	// A file: URI lets the path hold '?', '#' and '%', escaped here and
	// unescaped by SQLite.
	p := (&url.URL{Path: t.Path}).EscapedPath()
	if strings.HasPrefix(t.Path, "//") {
		// "file://" would read the first segment as an authority.
		p = "/" + strings.TrimLeft(p, "/")
	}
	return "file:" + p
}

// Redacted is the target for messages: the PostgreSQL URL without its
// password (nor that of the listener's URL in rheo_listen_url), or the
// SQLite path.
func (t Target) Redacted() string {
	switch {
	case t.Kind == Postgres:
		if u, err := url.Parse(t.DSN); err == nil {
			redactListenURL(u)
			return u.Redacted()
		}
		return "PostgreSQL URL"
	case t.Memory:
		return "sqlite::memory:"
	default:
		return t.Path
	}
}

// listenURLParam is the parameter of driver/postgres that carries the
// URL of the wakeup listener's own connection.
const listenURLParam = "rheo_listen_url"

// redactListenURL replaces the password of the URL in u's rheo_listen_url
// parameter; a value that is not a URL (a keyword/value string, which may
// hold a password) is replaced whole.
func redactListenURL(u *url.URL) {
	q := u.Query()
	v, ok := q[listenURLParam]
	if !ok {
		return
	}
	for i, raw := range v {
		lu, err := url.Parse(raw)
		switch {
		case err != nil || (lu.Scheme != "postgres" && lu.Scheme != "postgresql"):
			v[i] = "xxxxx"
		default:
			v[i] = lu.Redacted()
		}
	}
	u.RawQuery = q.Encode()
}

// Parse recognises a database URL:
//
//	postgres://… and postgresql://…   PostgreSQL; the URL is the DSN
//	sqlite:///abs/path/file.db         SQLite file at /abs/path/file.db
//	sqlite://relative/path.db          SQLite file at relative/path.db
//	sqlite:relative.db                 SQLite file at relative.db
//	sqlite::memory:, sqlite://:memory: SQLite in memory
//
// Schemes are case-insensitive. SQLite paths are percent-decoded and may
// not carry a query or fragment. Anything else is an error that names the
// accepted forms; errors never repeat a password.
func Parse(raw string) (Target, error) {
	scheme, rest, ok := strings.Cut(raw, ":")
	if raw == "" {
		return Target{}, fmt.Errorf("no database URL given; use one of %s", Forms)
	}
	if !ok {
		return Target{}, fmt.Errorf("database URL has no scheme; use one of %s", Forms)
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return parsePostgres(strings.ToLower(scheme) + ":" + rest)
	case "sqlite":
		return parseSQLite(rest)
	default:
		return Target{}, fmt.Errorf("unsupported database URL scheme %q; use one of %s", scheme, Forms)
	}
}

func parsePostgres(dsn string) (Target, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return Target{}, fmt.Errorf("PostgreSQL URL must start with postgres:// or postgresql://")
	}
	if _, err := url.Parse(dsn); err != nil {
		// url.Error repeats the whole URL, password included: keep only
		// the reason.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return Target{}, fmt.Errorf("invalid PostgreSQL URL: %v", err)
	}
	return Target{Kind: Postgres, DSN: dsn}, nil
}

func parseSQLite(rest string) (Target, error) {
	if strings.ContainsAny(rest, "?#") {
		return Target{}, fmt.Errorf("SQLite URL may not have a query or fragment; use one of %s", Forms)
	}
	// sqlite://x is x, sqlite:///abs is /abs, sqlite:x is x.
	path := strings.TrimPrefix(rest, "//")
	if path == ":memory:" {
		return Target{Kind: SQLite, Memory: true}, nil
	}
	path, err := url.PathUnescape(path)
	if err != nil {
		return Target{}, fmt.Errorf("invalid SQLite URL: %v", err)
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return Target{}, fmt.Errorf("SQLite URL names no database file; use one of %s", Forms)
	}
	return Target{Kind: SQLite, Path: path}, nil
}
