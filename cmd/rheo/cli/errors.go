package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
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
// terminal.
func (c *call) describe(err error) string {
	var (
		msg       *failure
		usage     *usageError
		urlErr    *connect.URLError
		schemaErr *connect.SchemaError
		pgErr     *pgconn.PgError
		failed    *rheo.FailedError
	)
	switch {
	case errors.As(err, &msg):
		return msg.msg
	case errors.As(err, &usage):
		return usage.msg
	case errors.Is(err, sqlite.ErrNoDriver):
		return errNoSQLite.Error()
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
	case errors.Is(err, rheo.ErrBackendUnavailable) && errors.As(err, &pgErr):
		// The server refused the connection, or ended the session.
		return c.describeRefusal(pgErr)
	case errors.Is(err, rheo.ErrBackendUnavailable):
		return c.describeUnreachable(err)
	case errors.As(err, &pgErr):
		return c.describeServerError(pgErr)
	case errors.Is(err, context.DeadlineExceeded):
		return "the database did not answer in time"
	case errors.As(err, &failed) && failed.Op == "open" && c.target.Kind == dburl.SQLite:
		return fmt.Sprintf("cannot open the SQLite database %s: %v; check %s", c.target.Redacted(), rootCause(failed.Err), c.urlSource())
	case errors.As(err, &failed):
		return fmt.Sprintf("%s failed: %v", failed.Op, rootCause(failed.Err))
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
// the schema of c's database, ready to paste into a shell: the URL from
// the environment stays "$DATABASE_URL"; a URL given as a flag is quoted
// for the shell, without its passwords (the userinfo's, password= and
// sslpassword=, which the message must not show) and without the
// driver's rheo_* parameters (which rheo-migrate ignores,
// and whose listener URL can hold a password too).
func (c *call) migrateCommand() string {
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
type server struct {
	addr, user, database string
	host                 string
	port                 uint16
}

func (c *call) server() server {
	cfg, err := pgx.ParseConfig(c.target.DSN)
	if err != nil {
		return server{addr: "the server"}
	}
	addr := cfg.Host
	if !strings.HasPrefix(addr, "/") { // not a Unix socket directory
		addr = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	}
	return server{addr: addr, user: cfg.User, database: cfg.Database, host: cfg.Host, port: cfg.Port}
}

// describeRefusal puts into words a server that refused a connection or
// ended the session.
// Names are echoed as typed, between double quotes, unescaped.
func (c *call) describeRefusal(pgErr *pgconn.PgError) string {
	s := c.server()
	check := "check " + c.urlSource()
	switch pgErr.Code {
	case "3D000": // invalid_catalog_name
		createdb := fmt.Sprintf("createdb -h %s -p %d -U %s %s", shellQuote(s.host), s.port, shellQuote(s.user), shellQuote(s.database))
		return fmt.Sprintf(`the database "%s" does not exist on the server at %s; create it with: %s, or correct the database name in %s`,
			s.database, s.addr, createdb, c.urlSource())
	case "28P01": // invalid_password
		return fmt.Sprintf(`the server at %s refused the password of user "%s"; %s (or PGPASSWORD, ~/.pgpass)`, s.addr, s.user, check)
	case "28000": // invalid_authorization_specification: no such role, or no pg_hba.conf entry
		if strings.Contains(pgErr.Message, "pg_hba.conf") {
			return fmt.Sprintf("the server at %s does not admit this connection (%s); its pg_hba.conf must allow this host, user and database",
				s.addr, pgErr.Message)
		}
		return fmt.Sprintf(`the server at %s refused user "%s": %s; %s`, s.addr, s.user, pgErr.Message, check)
	case "42501": // insufficient_privilege: no CONNECT on the database
		return fmt.Sprintf(`user "%s" may not connect to the database "%s" on the server at %s (%s); an administrator can: GRANT CONNECT ON DATABASE …`,
			s.user, s.database, s.addr, pgErr.Message)
	case "53300": // too_many_connections
		return fmt.Sprintf("the server at %s has no connection left for this user (%s); try again later, or raise its limits",
			s.addr, pgErr.Message)
	case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return fmt.Sprintf("the server at %s is shutting down, restarting or starting up (%s); try again in a moment", s.addr, pgErr.Message)
	}
	if strings.HasPrefix(pgErr.Code, "08") { // connection_exception
		return fmt.Sprintf("the connection to the server at %s broke (%s); try again", s.addr, serverMessage(pgErr))
	}
	return fmt.Sprintf("the server at %s refused the connection: %s; %s", s.addr, serverMessage(pgErr), check)
}

// describeUnreachable puts into words a database that could not be
// reached.
func (c *call) describeUnreachable(err error) string {
	if c.target.Kind == dburl.SQLite {
		cause := rootCause(err).Error()
		if strings.Contains(cause, "locked") || strings.Contains(cause, "busy") {
			return fmt.Sprintf("the SQLite database %s is busy: another process held it past the busy timeout; try again", c.target.Redacted())
		}
		return fmt.Sprintf("cannot open the SQLite database %s: %s; check %s", c.target.Redacted(), cause, c.urlSource())
	}
	var (
		dnsErr *net.DNSError
		cause  string
	)
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		cause = fmt.Sprintf("no host is named %s", dnsErr.Name)
	case errors.As(err, &dnsErr):
		cause = fmt.Sprintf("the name %s could not be looked up (%s)", dnsErr.Name, dnsErr.Err)
	case isTimeout(err):
		cause = "no answer within the connect timeout"
	default:
		cause = rootCause(err).Error()
	}
	return fmt.Sprintf("cannot reach the database %s: %s; check %s, and that the database is up",
		c.target.Redacted(), cause, c.urlSource())
}

func isTimeout(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout())
}

// describeServerError puts into words an error the server answered a
// statement with that is none of Rheo's words.
func (c *call) describeServerError(pgErr *pgconn.PgError) string {
	msg := serverMessage(pgErr)
	switch {
	case pgErr.Code == "42501": // insufficient_privilege
		return fmt.Sprintf(`permission denied (%s): user "%s" lacks the Rheo role this command needs; `+
			"grant it rheo_reader, rheo_producer, rheo_consumer or rheo_admin (docs/security.md)", msg, c.server().user)
	case pgErr.Code == "57014": // query_canceled
		if strings.Contains(pgErr.Message, "statement timeout") {
			return "the database cancelled the statement at its statement_timeout; nothing was changed; raise the timeout for this user or in the URL (options=-c statement_timeout=…)"
		}
		return fmt.Sprintf("the database cancelled the statement (%s); nothing was changed", msg)
	case pgErr.Code == "25006": // read_only_sql_transaction
		return fmt.Sprintf("the database is read-only here (%s): a standby, or default_transaction_read_only; point %s at the primary", msg, c.urlSource())
	case pgErr.Code == "42883", pgErr.Code == "42P01", pgErr.Code == "42703", pgErr.Code == "3F000":
		// undefined function, table, column or schema
		return fmt.Sprintf("the database's Rheo schema does not match this build of rheo (%s); upgrade it with: %s", msg, c.migrateCommand())
	case pgErr.Code == "40001", pgErr.Code == "40P01": // serialization_failure, deadlock_detected
		return fmt.Sprintf("the database aborted the transaction to resolve a conflict (%s); nothing was changed; run the command again", msg)
	case pgErr.Code == "55P03": // lock_not_available
		return fmt.Sprintf("a lock was not granted in time (%s); nothing was changed; run the command again", msg)
	case strings.HasPrefix(pgErr.Code, "53"): // insufficient_resources
		return fmt.Sprintf("the database server is out of resources (%s); nothing was changed", msg)
	}
	return "the database refused it: " + msg
}

// serverMessage is a server error's message and detail, without the
// severity and the SQLSTATE that pgx adds.
func serverMessage(pgErr *pgconn.PgError) string {
	if pgErr.Detail != "" {
		return pgErr.Message + " (" + pgErr.Detail + ")"
	}
	return pgErr.Message
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
			// The drivers wrap as fmt.Errorf("%w: %w", word, cause): the
			// cause comes last.
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
