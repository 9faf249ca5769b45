// Command rheo-migrate installs or upgrades Rheo's storage in a database,
// the step a host runs when it releases:
//
//	rheo-migrate up     [--database-url URL] [--role-prefix P]   apply what is missing
//	rheo-migrate status [--database-url URL] [--role-prefix P]   show what is applied
//	rheo-migrate roles  [--database-url URL] [--role-prefix P]   create the roles, hand Rheo over to rheo_owner
//	rheo-migrate sql    [--sqlite | --role-prefix P]             print the install SQL
//
// URL defaults to $DATABASE_URL. P, PostgreSQL only, is put before the
// names of Rheo's roles in this database (migrate.Options.RolePrefix):
// with acme_ they are acme_rheo_owner, acme_rheo_reader, …, so that
// installs in several databases of one server do not share roles. An
// install keeps the prefix of its first run; status and every later run
// must be given the same one. It is a PostgreSQL URL (postgres://… or
// postgresql://…) or an SQLite one (sqlite:///abs/path.db,
// sqlite://relative/path.db, sqlite:relative.db, sqlite::memory:).
//
// Exit statuses, for release steps:
//
//	0  done; for status: the schema and functions are current
//	1  failed: one line on stderr says why
//	2  bad command line: an unknown command or flag, an extra argument, no
//	   or a malformed database URL, an invalid role prefix, roles or a
//	   role prefix on SQLite; the usage follows
//	3  status only: a migration is pending (rheo-migrate up applies it)
//	4  status only: the database is newer than this build (a later
//	   release migrated it; use that release's rheo-migrate)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/dburl"
	"github.com/rheo-go/rheo/migrate"
)

const usage = `Usage:
  rheo-migrate up     [--database-url URL] [--role-prefix P]   apply the missing migrations and functions
  rheo-migrate status [--database-url URL] [--role-prefix P]   show the applied and latest versions
  rheo-migrate roles  [--database-url URL] [--role-prefix P]   create Rheo's roles and hand Rheo over to rheo_owner
                                                               (PostgreSQL, as a superuser or a role with CREATEROLE)
  rheo-migrate sql    [--sqlite | --role-prefix P]             print the install SQL (PostgreSQL, or SQLite)

URL defaults to $DATABASE_URL. Accepted forms: ` + dburl.Forms + `

P (PostgreSQL only) is put before the names of Rheo's roles in this
database: with acme_ they are acme_rheo_owner, acme_rheo_reader, … An
install keeps the prefix of its first run; give the same one every time.

Exit status:
  0  done; for status: the schema and functions are current
  1  failed: one line on stderr says why
  2  bad command line (unknown command or flag, extra argument, no or a
     malformed database URL, an invalid role prefix, roles or a role
     prefix on SQLite)
  3  status only: a migration is pending; rheo-migrate up applies it
  4  status only: the database is newer than this build; use a newer one
`

// The exit statuses of run.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	// exitPending: status found a migration to apply.
	exitPending = 3
	// exitNewer: status found a database migrated by a newer build.
	exitNewer = 4
)

// connectTimeout bounds connecting when the URL sets no connect_timeout.
const connectTimeout = 15 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status: exitOK,
// exitFailure (one line on stderr), exitUsage (the usage on stderr),
// exitPending when status finds a migration to apply, or exitNewer when
// it finds a database newer than this build.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("rheo-migrate "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }

	var databaseURL *string
	var sqlite *bool
	const prefixUsage = "put before the names of Rheo's roles (PostgreSQL), such as acme_"
	var prefix *string
	switch cmd {
	case "up", "status", "roles":
		databaseURL = fs.String("database-url", "", "database URL; defaults to $DATABASE_URL")
		prefix = fs.String("role-prefix", "", prefixUsage)
	case "sql":
		sqlite = fs.Bool("sqlite", false, "print the SQLite install SQL instead of PostgreSQL's")
		prefix = fs.String("role-prefix", "", prefixUsage)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "rheo-migrate: unknown command %q\n%s", cmd, usage)
		return exitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage // fs has printed the error and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "rheo-migrate %s: unexpected argument %q\n%s", cmd, fs.Arg(0), usage)
		return exitUsage
	}

	if _, err := migrate.RoleNamesFor(*prefix); err != nil {
		fmt.Fprintf(stderr, "rheo-migrate %s: --role-prefix: %s\n%s", cmd, strings.TrimPrefix(err.Error(), "invalid_argument: "), usage)
		return exitUsage
	}
	opts := &migrate.Options{RolePrefix: *prefix}

	if cmd == "sql" {
		switch {
		case *sqlite && *prefix != "":
			fmt.Fprintf(stderr, "rheo-migrate sql: SQLite has no roles; --role-prefix applies to PostgreSQL only\n%s", usage)
			return exitUsage
		case *sqlite:
			fmt.Fprint(stdout, migrate.SQLiteSQL())
		default:
			script, err := migrate.PostgresSQLFor(opts)
			if err != nil {
				return fail(stderr, err)
			}
			fmt.Fprint(stdout, script)
		}
		return exitOK
	}

	raw := *databaseURL
	if raw == "" {
		raw = os.Getenv("DATABASE_URL")
	}
	if raw == "" {
		fmt.Fprintf(stderr, "rheo-migrate %s: no database URL: pass --database-url or set DATABASE_URL\n%s", cmd, usage)
		return exitUsage
	}
	target, err := dburl.Parse(raw)
	if err == nil && target.Kind == dburl.Postgres {
		_, err = pgx.ParseConfig(target.DSN)
		if err != nil {
			err = fmt.Errorf("invalid PostgreSQL URL: %w", err)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "rheo-migrate %s: %s\n%s", cmd, strings.Join(strings.Fields(err.Error()), " "), usage)
		return exitUsage
	}
	var (
		out     []string
		pending state
	)
	switch {
	case target.Kind == dburl.Postgres:
		out, pending, err = postgres(ctx, cmd, target, opts)
	case cmd == "roles":
		fmt.Fprintf(stderr, "rheo-migrate roles: SQLite has no roles; it applies to PostgreSQL only\n%s", usage)
		return exitUsage
	case *prefix != "":
		fmt.Fprintf(stderr, "rheo-migrate %s: SQLite has no roles; --role-prefix applies to PostgreSQL only\n%s", cmd, usage)
		return exitUsage
	default:
		out, pending, err = sqliteCmd(ctx, cmd, target)
	}
	if err != nil {
		return fail(stderr, err)
	}
	for _, line := range out {
		fmt.Fprintln(stdout, line)
	}
	switch pending {
	case statePending:
		return exitPending
	case stateNewer:
		return exitNewer
	}
	return exitOK
}

// state is what status found.
type state int

const (
	stateCurrent state = iota
	statePending
	stateNewer
)

// fail prints err as one line and returns the failure status.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "rheo-migrate: %s\n", strings.Join(strings.Fields(err.Error()), " "))
	return exitFailure
}

// postgres runs cmd ("up", "status" or "roles") on a PostgreSQL target
// with opts (the role prefix) and returns the lines to print, and for
// status what it found.
func postgres(ctx context.Context, cmd string, target dburl.Target, opts *migrate.Options) ([]string, state, error) {
	conn, err := connectPostgres(ctx, target.DSN)
	if err != nil {
		return nil, stateCurrent, err
	}
	defer conn.Close(context.WithoutCancel(ctx))

	if cmd == "roles" {
		if err := migrate.PostgresRoles(ctx, conn, opts); err != nil {
			return nil, stateCurrent, err
		}
		roles, err := migrate.PostgresRoleState(ctx, conn)
		if err != nil {
			return nil, stateCurrent, err
		}
		return []string{rolesLine(roles)}, stateCurrent, nil
	}

	applied, latest, err := migrate.PostgresStatus(ctx, conn)
	if err != nil {
		return nil, stateCurrent, err
	}
	current, err := migrate.PostgresFunctionsCurrent(ctx, conn)
	if err != nil {
		return nil, stateCurrent, err
	}
	if cmd == "status" {
		roles, err := migrate.PostgresRoleState(ctx, conn)
		if err != nil {
			return nil, stateCurrent, err
		}
		if applied > 0 && roles.Prefix != opts.RolePrefix {
			return nil, stateCurrent, prefixMismatch(roles.Prefix, opts.RolePrefix)
		}
		followUps, err := migrate.PostgresFollowUps(ctx, conn)
		if err != nil {
			return nil, stateCurrent, err
		}
		lines := []string{
			schemaLine(applied, latest),
			"functions: " + map[bool]string{true: "current", false: "not current"}[current],
		}
		if followUps > 0 {
			lines = append(lines, fmt.Sprintf("follow-ups: %d left by the last upgrade", followUps))
		}
		if applied > 0 {
			lines = append(lines, rolesLine(roles))
		}
		st := stateCurrent
		switch {
		case applied > latest:
			st = stateNewer
		case applied < latest || !current || followUps > 0:
			st = statePending
		}
		return append(lines, stateLine(st, applied, latest)), st, nil
	}

	if err := migrate.Postgres(ctx, conn, opts); err != nil {
		return nil, stateCurrent, err
	}
	after, _, err := migrate.PostgresStatus(ctx, conn)
	if err != nil {
		return nil, stateCurrent, err
	}
	roles, err := migrate.PostgresRoleState(ctx, conn)
	if err != nil {
		return nil, stateCurrent, err
	}
	fnLine := "functions: current"
	if !current {
		fnLine = "functions: installed"
	}
	return []string{upSchemaLine(applied, after), fnLine, rolesLine(roles)}, stateCurrent, nil
}

// rolesLine says how Rheo's roles stand and, when they are not settled,
// what to run.
func rolesLine(s migrate.RoleState) string {
	switch {
	case len(s.Missing) > 0:
		return fmt.Sprintf("roles: %s missing; run rheo-migrate roles as a superuser or a role with CREATEROLE",
			strings.Join(s.Missing, ", "))
	case s.SchemaOwner != s.Names.Owner:
		return fmt.Sprintf("roles: Rheo belongs to %s, not %s; run rheo-migrate roles as a superuser or a role with CREATEROLE",
			s.SchemaOwner, s.Names.Owner)
	}
	return "roles: " + s.Names.Owner + " owns Rheo; grant " +
		strings.Join(s.Names.All()[1:], ", ") + " to login roles"
}

// prefixMismatch is status's error for a role prefix other than the
// install's, in the words of up's.
func prefixMismatch(installed, given string) error {
	describe := func(p, none string) string {
		if p == "" {
			return none
		}
		return "role prefix " + p
	}
	flag := "no --role-prefix"
	if installed != "" {
		flag = "--role-prefix " + installed
	}
	return fmt.Errorf("Rheo in this database was installed with %s, not %s, and an install keeps its role names: run rheo-migrate with %s",
		describe(installed, "the default role names"), describe(given, "the default ones"), flag)
}

// connectPostgres connects, turning a failure into one readable cause.
func connectPostgres(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("invalid database URL: %w", err)
	}
	// The driver's own parameters (rheo_listen_url, rheo_poll_only) mean
	// nothing here; pgx would send them to the server as settings.
	for name := range cfg.RuntimeParams {
		if strings.HasPrefix(name, "rheo_") {
			delete(cfg.RuntimeParams, name)
		}
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return conn, nil
	}
	addr := cfg.Host
	if !strings.HasPrefix(addr, "/") { // not a Unix socket directory
		addr = net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return nil, fmt.Errorf("cannot connect to the database at %s: %s", addr, pgErr.Message)
	}
	return nil, fmt.Errorf("cannot reach the database at %s: %w", addr, rootCause(err))
}

// rootCause follows the chain of wrapped errors to the first one that
// wraps nothing, such as "connection refused".
func rootCause(err error) error {
	for {
		switch e := err.(type) {
		case interface{ Unwrap() error }:
			next := e.Unwrap()
			if next == nil {
				return err
			}
			err = next
		case interface{ Unwrap() []error }:
			errs := e.Unwrap()
			if len(errs) == 0 {
				return err
			}
			err = errs[0]
		default:
			return err
		}
	}
}

// driverCause is the SQLite driver's own error inside err, which the
// Rheo driver wraps in a *rheo.UnavailableError or *rheo.FailedError.
func driverCause(err error) error {
	var unavailable *rheo.UnavailableError
	if errors.As(err, &unavailable) {
		return unavailable.Err
	}
	var failed *rheo.FailedError
	if errors.As(err, &failed) {
		return failed.Err
	}
	return err
}

// sqliteCmd runs cmd ("up" or "status") on an SQLite target and returns
// the lines to print, and for status what it found.
func sqliteCmd(ctx context.Context, cmd string, target dburl.Target) ([]string, state, error) {
	if sqlite.DefaultDriverName() == "" {
		return nil, stateCurrent, errors.New("this build of rheo-migrate has no SQLite driver: " + sqlite.BuildHint)
	}
	if cmd == "status" && !target.Memory {
		// Opening a missing file would create it.
		if _, err := os.Stat(target.Path); errors.Is(err, os.ErrNotExist) {
			return nil, stateCurrent, fmt.Errorf("no SQLite database at %s", target.Path)
		}
	}
	// The driver's Open sets WAL and the busy timeout in the form of the
	// SQLite driver linked in, and keeps the one connection an in-memory
	// database lives in.
	d, err := sqlite.Open(ctx, target.SQLiteDSN(), nil)
	if err != nil {
		return nil, stateCurrent, fmt.Errorf("cannot open the SQLite database at %s: %w", target.Redacted(), driverCause(err))
	}
	defer d.Close()
	db := d.DB()

	applied, latest, err := migrate.SQLiteStatus(ctx, db)
	if err != nil {
		return nil, stateCurrent, err
	}
	if cmd == "status" {
		st := stateCurrent
		switch {
		case applied > latest:
			st = stateNewer
		case applied < latest:
			st = statePending
		}
		return []string{schemaLine(applied, latest), stateLine(st, applied, latest)}, st, nil
	}
	if err := migrate.SQLite(ctx, db); err != nil {
		return nil, stateCurrent, err
	}
	after, _, err := migrate.SQLiteStatus(ctx, db)
	if err != nil {
		return nil, stateCurrent, err
	}
	return []string{upSchemaLine(applied, after)}, stateCurrent, nil
}

func schemaLine(applied, latest int32) string {
	return fmt.Sprintf("schema: version %d of %d", applied, latest)
}

func upSchemaLine(before, after int32) string {
	if before == after {
		return fmt.Sprintf("schema: version %d, already current", after)
	}
	return fmt.Sprintf("schema: version %d -> %d", before, after)
}

// stateLine says what status found and what to do.
func stateLine(st state, applied, latest int32) string {
	switch st {
	case statePending:
		return "status: pending, run rheo-migrate up"
	case stateNewer:
		return fmt.Sprintf("status: the database is newer than this build (schema version %d, this build's latest %d); use a newer rheo-migrate", applied, latest)
	}
	return "status: up to date"
}
