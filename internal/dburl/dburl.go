// Package dburl turns the database URLs that Rheo's commands accept into a
// connection target: a PostgreSQL connection string, or an SQLite file or
// in-memory database.
package dburl

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Kind is the database a URL points at.
type Kind int

const (
	// Postgres is a PostgreSQL server.
	Postgres Kind = iota + 1
	// SQLite is an SQLite database file or an in-memory database.
	SQLite
	// Registered is a database of a driver that registered the URL's
	// scheme with package connect (Redis, say): the URL is the driver's
	// to read.
	Registered
)

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Postgres:
		return "PostgreSQL"
	case SQLite:
		return "SQLite"
	case Registered:
		return "registered"
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
	// Scheme is the URL's scheme in lower case, for a Registered URL;
	// "" otherwise.
	Scheme string
	// DSN is the PostgreSQL connection string (the URL, with its scheme in
	// lower case), or a Registered URL as given; "" for SQLite.
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

// Redacted is the target for messages: the PostgreSQL or Registered URL
// without its passwords, or the SQLite path. Every place that names a
// database in a message goes through it (Redact for a URL that did not
// parse).
func (t Target) Redacted() string {
	switch {
	case t.Kind == Postgres || t.Kind == Registered:
		return Redact(t.DSN)
	case t.Memory:
		return "sqlite::memory:"
	default:
		return t.Path
	}
}

// mask replaces a password in a redacted URL.
const mask = "xxxxx"

// secretParams are the query parameters whose values are secrets: the
// password, the password of the TLS client key, and the URL of the
// wakeup listener's own connection (driver/postgres), which may hold a
// password itself.
var secretParams = map[string]bool{"password": true, "sslpassword": true, listenURLParam: true}

// listenURLParam is the parameter of driver/postgres that carries the
// URL of the wakeup listener's own connection.
const listenURLParam = "rheo_listen_url"

// Redact returns the PostgreSQL URL raw (or any URL of the same
// scheme://user:password@host?password=… shape) without its passwords, in every
// form a password can take in it: the userinfo's (up to the first '@',
// as libpq and pgx read it, which Parse makes sure is also where
// net/url ends it), the values of password and sslpassword in the
// query, whatever their spelling in percent-escapes, and those of the
// URL in rheo_listen_url, redacted the same way (a value that is not a
// URL is masked whole). The rest of the URL is kept as written, for the
// reader to recognise it.
func Redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "PostgreSQL URL"
	}
	var b strings.Builder
	b.WriteString(scheme + "://")
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		user, _, hasPassword := strings.Cut(rest[:i], ":")
		switch {
		case strings.ContainsAny(rest[:i], "?#"):
			// A URL Parse refuses: what comes before the '@' may be a
			// query with a password in it.
			b.WriteString(mask)
		case hasPassword:
			b.WriteString(user + ":" + mask)
		default:
			b.WriteString(user)
		}
		b.WriteByte('@')
		rest = rest[i+1:]
	}
	base, query, hasQuery := strings.Cut(rest, "?")
	b.WriteString(base)
	if !hasQuery {
		return b.String()
	}
	query, fragment, hasFragment := strings.Cut(query, "#")
	b.WriteByte('?')
	for i, pair := range strings.Split(query, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		key, value, hasValue := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(key)
		if err != nil {
			name = key
		}
		switch {
		case !hasValue || !secretParams[strings.ToLower(name)]:
			b.WriteString(pair)
		case strings.ToLower(name) == listenURLParam:
			b.WriteString(key + "=" + redactListenURL(value))
		default:
			b.WriteString(key + "=" + mask)
		}
	}
	if hasFragment {
		b.WriteString("#" + fragment)
	}
	return b.String()
}

// redactListenURL redacts the percent-encoded URL of rheo_listen_url; a
// value that is not a PostgreSQL URL (a keyword/value string, which may
// hold a password) is masked whole.
func redactListenURL(value string) string {
	lu, err := url.QueryUnescape(value)
	if err != nil {
		return mask
	}
	scheme, _, _ := strings.Cut(lu, "://")
	if s := strings.ToLower(scheme); s != "postgres" && s != "postgresql" {
		return mask
	}
	return url.QueryEscape(Redact(lu))
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
	return ParseAlso(raw, nil)
}

// FormsAlso is Forms followed by the form scheme://… of each of the
// registered schemes, for usage texts and error messages.
func FormsAlso(registered []string) string {
	forms := Forms
	for _, s := range registered {
		forms += ", " + s + "://…"
	}
	return forms
}

// ParseAlso is Parse that also accepts the registered schemes (lower
// case, as package connect keeps them): a URL of one of them is a
// Registered target whose DSN is the URL as given, for its driver to
// read. Its errors name the registered forms beside Parse's.
func ParseAlso(raw string, registered []string) (Target, error) {
	scheme, rest, ok := strings.Cut(raw, ":")
	if raw == "" {
		return Target{}, fmt.Errorf("no database URL given; use one of %s", FormsAlso(registered))
	}
	if !ok {
		return Target{}, fmt.Errorf("database URL has no scheme; use one of %s", FormsAlso(registered))
	}
	if lower := strings.ToLower(scheme); slices.Contains(registered, lower) {
		return Target{Kind: Registered, Scheme: lower, DSN: raw}, nil
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return parsePostgres(strings.ToLower(scheme) + ":" + rest)
	case "sqlite":
		return parseSQLite(rest)
	default:
		return Target{}, fmt.Errorf("unsupported database URL scheme %q; use one of %s", scheme, FormsAlso(registered))
	}
}

func parsePostgres(dsn string) (Target, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return Target{}, fmt.Errorf("PostgreSQL URL must start with postgres:// or postgresql://")
	}
	if err := checkUserinfo(dsn); err != nil {
		return Target{}, err
	}
	if _, err := url.Parse(dsn); err != nil {
		// url.Error repeats the whole URL, password included, and the
		// reason may quote a piece of it ("invalid port \":pass\""): with
		// credentials in the URL, say only what to check.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		if quotesCredentials(dsn, err.Error()) {
			return Target{}, fmt.Errorf("invalid PostgreSQL URL: its user, password, host or port cannot be read; " +
				"percent-encode any @ : / ? # %% in the user name and password (@ as %%40)")
		}
		return Target{}, fmt.Errorf("invalid PostgreSQL URL: %v", err)
	}
	return Target{Kind: Postgres, DSN: dsn}, nil
}

// quoted is a string that net/url's reasons quote with %q.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// quotesCredentials reports whether net/url's reason for refusing dsn
// quotes a piece of it that may belong to a user name or password: one
// found before the URL's last '@' only (with a password holding a '/',
// net/url reads a piece of it as the port).
func quotesCredentials(dsn, reason string) bool {
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return false
	}
	for _, q := range quoted.FindAllString(reason, -1) {
		piece, err := strconv.Unquote(q)
		if err != nil || !strings.Contains(dsn[at+1:], piece) {
			return true
		}
	}
	return false
}

// checkUserinfo refuses a URL whose user and password libpq (and pgx,
// which reads URLs as libpq does) would split elsewhere than net/url: an
// unencoded '@' in the password, or a '?' or '#' before the '@'. libpq
// ends the userinfo at the first '@' before a '/', net/url at the last
// '@' of the authority, which ends at the first '/', '?' or '#'. Where
// they differ, a piece of the password would be read as the host, and
// be printed in messages as one; where they agree, Redact masks exactly
// the password the server is given.
func checkUserinfo(dsn string) error {
	_, rest, _ := strings.Cut(dsn, "://")
	i := strings.IndexAny(rest, "@/")
	if i < 0 || rest[i] != '@' {
		return nil
	}
	host := rest[i+1:]
	if j := strings.IndexAny(host, "/?#"); j >= 0 {
		host = host[:j]
	}
	if strings.ContainsAny(rest[:i], "?#") || strings.Contains(host, "@") {
		return fmt.Errorf("invalid PostgreSQL URL: its user name or password holds an unencoded @, ? or #; " +
			"percent-encode them (@ as %%40, ? as %%3F, # as %%23)")
	}
	return nil
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
