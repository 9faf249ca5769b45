package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver/postgres"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/dburl"
)

// pgxCannotParse is how pgx begins the refusal of a connection string.
var pgxCannotParse = regexp.MustCompile("cannot parse `[^`]*`: ")

// usageWords are the vocabulary words of a bad command line: what the
// database refuses as invalid exits with ExitUsage, like the same check
// made by the command itself.
var usageWords = []*rheo.Error{
	rheo.ErrInvalidArgument, rheo.ErrInvalidPartition, rheo.ErrInvalidPartitionCount,
	rheo.ErrInvalidReplayOpts, rheo.ErrConfirmRequired,
}

// isUsage reports whether err means that the command line was wrong: a
// *usageError, or one of usageWords (a bad database URL included, which
// is invalid_argument). A *failure is when it says so.
func isUsage(err error) bool {
	var f *failure
	if errors.As(err, &f) {
		return f.usage
	}
	var u *usageError
	if errors.As(err, &u) {
		return true
	}
	for _, word := range usageWords {
		if errors.Is(err, word) {
			return true
		}
	}
	return false
}

// describe turns err into the line a person reads: what went wrong and
// what to do about it. It is the one place where errors are put into
// words: no SQLSTATE, no "ERROR:" and no driver's wording reach the
// terminal. The drivers classify the failures (rheo.Kind), so the same
// failure reads the same on PostgreSQL and SQLite.
func (c *call) describe(err error) string {
	var (
		msg       *failure
		usage     *usageError
		urlErr    *connect.URLError
		schemaErr *connect.SchemaError
		failed    *rheo.FailedError
	)
	switch {
	case errors.As(err, &msg):
		return msg.msg
	case errors.As(err, &usage):
		return usage.msg
	case errors.Is(err, sqlite.ErrNoDriver):
		return errNoSQLite.Error()
	case errors.Is(err, errors.ErrUnsupported):
		// A driver that cannot do an operation at all (docs/drivers.md).
		return fmt.Sprintf("the %s driver cannot do this (%s); nothing was changed", c.databaseName(), unsupported(err))
	case errors.As(err, &urlErr):
		// pgx's refusals come through the driver as text, prefixed with
		// the vocabulary word, "database url" and pgx's "cannot parse
		// `URL`" (the URL is in the message already).
		msg := strings.TrimPrefix(urlErr.Err.Error(), rheo.ErrInvalidArgument.Reason+": ")
		msg = pgxCannotParse.ReplaceAllString(strings.TrimPrefix(msg, "database url: "), "")
		return fmt.Sprintf("bad database URL in %s: %s", c.urlSource(), msg)
	case errors.As(err, &schemaErr):
		if schemaErr.Applied == 0 {
			return fmt.Sprintf("the database %s has no Rheo schema; install it with: %s", schemaErr.Database, c.migrateCommand())
		}
		return fmt.Sprintf("the database %s is at Rheo schema version %d of %d; upgrade it with: %s",
			schemaErr.Database, schemaErr.Applied, schemaErr.Latest, c.migrateCommand())
	case errors.Is(err, rheo.ErrStreamNotFound):
		return fmt.Sprintf("stream %q not found; list streams with: rheo streams", c.stream)
	case errors.Is(err, rheo.ErrGroupNotFound):
		return fmt.Sprintf("group %q not found on stream %q; list groups with: rheo groups %s", c.group, c.stream, c.stream)
	case errors.Is(err, rheo.ErrAmbiguous):
		return "the outcome is unknown: " + lostAnswer(err) + "; check whether the command took effect before running it again"
	case errors.Is(err, context.Canceled):
		return "interrupted"
	case errors.Is(err, rheo.ErrBackendUnavailable):
		return c.describeUnavailable(err)
	case rheo.KindOf(err) != rheo.KindUnknown:
		return c.describeFailure(rheo.KindOf(err), err)
	case errors.Is(err, context.DeadlineExceeded):
		return "the database did not answer in time"
	case errors.As(err, &failed) && failed.Op == "open" && c.target.Kind == dburl.SQLite:
		return fmt.Sprintf("cannot open the SQLite database %s: %s; check %s", c.target.Redacted(), cause(err), c.urlSource())
	case rheo.MessageOf(err) != "":
		return "the database refused it: " + rheo.MessageOf(err)
	case errors.As(err, &failed):
		return fmt.Sprintf("%s failed: %v", failed.Op, rootCause(failed.Err))
	case c.argFlags != nil && isUsage(err):
		return c.nameFlags(err.Error())
	}
	return err.Error()
}

// sqlArgument matches the names of SQL arguments in the database's
// refusals: "from_sequence must be between…", "partition 7 is outside…".
var sqlArgument = regexp.MustCompile(`\b([a-z]+(?:_[a-z]+)+|partitions|partition(?: -?\d+))\b`)

// nameFlags rewrites a refusal of the database in terms of the command's
// flags: the names of c.argFlags become the flags that fill them.
func (c *call) nameFlags(msg string) string {
	return sqlArgument.ReplaceAllStringFunc(msg, func(name string) string {
		if n, ok := strings.CutPrefix(name, "partition "); ok {
			if flag, ok := c.argFlags["partition"]; ok {
				return flag + " " + n
			}
			return name
		}
		if flag, ok := c.argFlags[name]; ok {
			return flag
		}
		return name
	})
}

// cause is the database's own words about err, else its root cause.
func cause(err error) string {
	if msg := rheo.MessageOf(err); msg != "" {
		return msg
	}
	return rootCause(err).Error()
}

// unsupported is what a driver said it cannot do: the message of the
// error inside its *rheo.FailedError (which repeats the operation and
// "failed"), or the whole message.
func unsupported(err error) string {
	if msg := rheo.MessageOf(err); msg != "" {
		return msg
	}
	var failed *rheo.FailedError
	if errors.As(err, &failed) && failed.Err != nil {
		return failed.Err.Error()
	}
	return err.Error()
}

// lostAnswer says why the answer to a write was lost.
func lostAnswer(err error) string {
	if errors.Is(err, context.Canceled) {
		return "interrupted while the database was committing"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "the database did not answer in time"
	}
	return "the connection to the database was lost before it answered"
}

// urlSource names where the database URL came from, for what to check.
func (c *call) urlSource() string {
	if c.urlFromEnv {
		return "$" + EnvDatabaseURL
	}
	return "--database-url"
}

// migrateCommand is the rheo-migrate command that installs or upgrades
// the schema of c's database, ready to paste into a shell (for a
// registered driver's database, what does its set-up instead): the URL from
// the environment stays "$DATABASE_URL"; a URL given as a flag is quoted
// for the shell, without its passwords (the userinfo's, password= and
// sslpassword=, which the message must not show) and without the
// driver's rheo_* parameters (which rheo-migrate ignores,
// and whose listener URL can hold a password too).
func (c *call) migrateCommand() string {
	if c.target.Kind == dburl.Registered {
		// rheo-migrate knows PostgreSQL and SQLite only; a registered
		// driver sets its database up when opened with Migrate.
		return fmt.Sprintf("a program that opens it with connect.Options{Migrate: true} (the %s driver's set-up; rheo-migrate installs PostgreSQL and SQLite only)",
			c.databaseName())
	}
	if c.urlFromEnv {
		return `rheo-migrate up --database-url "$` + EnvDatabaseURL + `"`
	}
	if c.target.Kind != dburl.Postgres {
		return "rheo-migrate up --database-url " + shellQuote(c.databaseURL)
	}
	u, err := url.Parse(c.target.DSN)
	if err != nil {
		return "rheo-migrate up --database-url URL"
	}
	q := u.Query()
	_, hasPassword := u.User.Password()
	for name := range q {
		switch lower := strings.ToLower(name); {
		case strings.HasPrefix(name, "rheo_"):
			q.Del(name)
		case lower == "password" || lower == "sslpassword":
			q.Del(name)
			hasPassword = true
		}
	}
	u.RawQuery = q.Encode()
	cmd := "rheo-migrate up --database-url "
	if hasPassword {
		u.User = url.User(u.User.Username())
		return cmd + shellQuote(u.String()) + " (the password is left out here: put it back into the URL, or set PGPASSWORD)"
	}
	return cmd + shellQuote(u.String())
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// letters, digits and the punctuation URLs and paths are made of.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// server is what the PostgreSQL URL names: the server's address, the
// user and the database, as typed (percent-decoded).
func (c *call) server() postgres.Server {
	s, err := postgres.ParseServer(c.target.DSN)
	if err != nil {
		return postgres.Server{Host: "the server"}
	}
	return s
}

// addr is the server's address, for messages.
func (c *call) addr() string {
	s := c.server()
	if s.Port == 0 {
		return s.Host
	}
	return s.Addr()
}

// describeUnavailable puts into words a database that could not be
// reached, refused the connection, or ended the session.
// Names are echoed as typed, between double quotes, unescaped.
func (c *call) describeUnavailable(err error) string {
	msg := rheo.MessageOf(err)
	s, addr := c.server(), c.addr()
	check := "check " + c.urlSource()
	switch rheo.KindOf(err) {
	case rheo.KindDatabaseNotFound:
		if c.target.Kind == dburl.SQLite {
			return fmt.Sprintf("no SQLite database at %s; create one with: %s", c.target.Path, c.migrateCommand())
		}
		createdb := fmt.Sprintf("createdb -h %s -p %d -U %s %s", shellQuote(s.Host), s.Port, shellQuote(s.User), shellQuote(s.Database))
		return fmt.Sprintf(`the database "%s" does not exist on the server at %s; create it with: %s, or correct the database name in %s`,
			s.Database, addr, createdb, c.urlSource())
	case rheo.KindAuthenticationFailed:
		return fmt.Sprintf(`the server at %s refused the password of user "%s"; %s (or PGPASSWORD, ~/.pgpass)`, addr, s.User, check)
	case rheo.KindNotAdmitted:
		return fmt.Sprintf("the server at %s does not admit this connection (%s); its pg_hba.conf must allow this host, user and database",
			addr, msg)
	case rheo.KindRoleNotFound:
		return fmt.Sprintf(`the server at %s refused user "%s": %s; %s`, addr, s.User, msg, check)
	case rheo.KindPermissionDenied:
		// No CONNECT on the database.
		return fmt.Sprintf(`user "%s" may not connect to the database "%s" on the server at %s (%s); an administrator can: GRANT CONNECT ON DATABASE …`,
			s.User, s.Database, addr, msg)
	case rheo.KindTooManyConnections:
		return fmt.Sprintf("the server at %s has no connection left for this user (%s); try again later, or raise its limits", addr, msg)
	case rheo.KindShuttingDown:
		return fmt.Sprintf("the server at %s is shutting down, restarting or starting up (%s); try again in a moment", addr, msg)
	case rheo.KindLockTimeout:
		return c.describeFailure(rheo.KindLockTimeout, err)
	case rheo.KindConnectionLost:
		if msg != "" {
			return fmt.Sprintf("the connection to the server at %s broke (%s); try again", addr, msg)
		}
	}
	if msg != "" && c.target.Kind == dburl.Postgres {
		return fmt.Sprintf("the server at %s refused the connection: %s; %s", addr, msg, check)
	}
	return c.describeUnreachable(err)
}

// describeUnreachable puts into words a database that could not be
// reached.
func (c *call) describeUnreachable(err error) string {
	if c.target.Kind == dburl.SQLite {
		return fmt.Sprintf("cannot open the SQLite database %s: %s; check %s", c.target.Redacted(), cause(err), c.urlSource())
	}
	var (
		dnsErr *net.DNSError
		why    string
	)
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		why = fmt.Sprintf("no host is named %s", dnsErr.Name)
	case errors.As(err, &dnsErr):
		why = fmt.Sprintf("the name %s could not be looked up (%s)", dnsErr.Name, dnsErr.Err)
	case rheo.KindOf(err) == rheo.KindTimeout:
		why = "no answer within the connect timeout"
	default:
		why = rootCause(err).Error()
	}
	return fmt.Sprintf("cannot reach the database %s: %s; check %s, and that the database is up",
		c.target.Redacted(), why, c.urlSource())
}

// describeFailure puts into words a statement that failed for a reason
// of kind, none of Rheo's words.
func (c *call) describeFailure(kind rheo.Kind, err error) string {
	msg := cause(err)
	switch kind {
	case rheo.KindPermissionDenied:
		return c.describePermission(msg)
	case rheo.KindTimeout:
		if rheo.MessageOf(err) == "" {
			return "the database did not answer in time"
		}
		return "the database cancelled the statement at its statement_timeout; nothing was changed; raise the timeout for this user or in the URL (options=-c statement_timeout=…)"
	case rheo.KindCanceled:
		return fmt.Sprintf("the database cancelled the statement (%s); nothing was changed", msg)
	case rheo.KindReadOnly:
		if c.target.Kind == dburl.SQLite {
			return fmt.Sprintf("the database is read-only here (%s): check that %s and its directory are writable by this user", msg, c.target.Path)
		}
		return fmt.Sprintf("the database is read-only here (%s): a standby, or default_transaction_read_only; point %s at the primary", msg, c.urlSource())
	case rheo.KindSchemaMissing:
		return fmt.Sprintf("the database's Rheo schema does not match this build of rheo (%s); upgrade it with: %s", msg, c.migrateCommand())
	case rheo.KindSerialization:
		return fmt.Sprintf("the database aborted the transaction to resolve a conflict (%s); nothing was changed; run the command again", msg)
	case rheo.KindLockTimeout:
		return fmt.Sprintf("a lock was not granted in time (%s); nothing was changed; run the command again", msg)
	case rheo.KindOutOfResources:
		return fmt.Sprintf("the database is out of resources (%s); nothing was changed", msg)
	case rheo.KindPreparedStatements:
		return fmt.Sprintf("the database refused a prepared statement (%s): a pooler in transaction mode, such as PgBouncer, "+
			"is in front of it; add default_query_exec_mode=exec to %s (docs/pgbouncer.md)", msg, c.urlSource())
	}
	return "the database refused it: " + msg
}

// describePermission names the role the command needs.
func (c *call) describePermission(msg string) string {
	role := c.role
	if role == "" {
		role = "rheo_admin"
	}
	if c.target.Kind != dburl.Postgres {
		return fmt.Sprintf("permission denied (%s)", msg)
	}
	user := c.server().User
	return fmt.Sprintf(`permission denied (%s): user "%s" needs the role %s for this command; an administrator can: GRANT %s TO %s (docs/security.md)`,
		msg, user, role, role, quoteIdent(user))
}

// quoteIdent quotes a PostgreSQL identifier when it needs quoting.
func quoteIdent(name string) string {
	plain := name != ""
	for i, r := range name {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// rootCause follows err's chain to the error that wraps nothing, such as
// "connection refused", or to the last one before a vocabulary word.
func rootCause(err error) error {
	for {
		var next error
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			next = e.Unwrap()
		case interface{ Unwrap() []error }:
			// A chain joined as fmt.Errorf("%w: %w", word, cause) puts
			// the cause last.
			if errs := e.Unwrap(); len(errs) > 0 {
				next = errs[len(errs)-1]
			}
		}
		if _, isWord := next.(*rheo.Error); next == nil || isWord {
			return err
		}
		err = next
	}
}
