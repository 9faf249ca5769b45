// Package cli is the rheo command: a demo of Rheo, and the operations an
// operator runs against a PostgreSQL or SQLite database, or one of a
// driver registered with package connect (streams, groups, lag, dead
// letters, replay, reset, retention and prune, append, query, tail, the
// dashboard, and creating and dropping streams and groups).
//
// Main is the whole program, which is what cmd/rheo, and the rheo
// command of the Redis driver's module, run. Run executes one command
// line in-process, which is how the tests drive it.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/sqlite"
	"github.com/rheo-go/rheo/internal/dburl"
	"github.com/rheo-go/rheo/internal/textsafe"
)

// The exit statuses of Run.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitFailure: the command failed or refused; one line on stderr says
	// why and what to do.
	ExitFailure = 1
	// ExitUsage: the command line is wrong: an unknown command or flag, a
	// missing or extra argument, a flag value or argument that the
	// command, or the database on its behalf (invalid_argument,
	// invalid_partition, invalid_partition_count, invalid_replay_opts,
	// confirm_required), refused as invalid; stderr says what and how to
	// call the command. Nothing was changed.
	ExitUsage = 2
)

// EnvDatabaseURL names the variable read when --database-url is not given.
const EnvDatabaseURL = "DATABASE_URL"

// command is one subcommand: its synopsis, its flags and what it does.
type command struct {
	name string
	// synopsis is the argument part of the usage line.
	synopsis string
	summary  string
	// details is printed by "rheo help CMD" after the flags.
	details string
	// args names the positional arguments; a trailing "..." entry takes
	// any number of further arguments.
	args []string
	// noDB: the command opens no database, so it takes no --database-url.
	noDB bool
	// noOutput: the command takes no --output flag.
	noOutput bool
	// define registers the command's own flags and returns what runs it.
	define func(fs *flag.FlagSet) func(c *call) error
}

// commands lists the subcommands in the order help shows them.
func commands() []*command {
	return []*command{
		demoCommand(),
		streamsCommand(), groupsCommand(), lagCommand(), infoCommand(), leasesCommand(), deadLettersCommand(),
		replayCommand(), resetCommand(),
		retentionCommand(), pruneCommand(), setOrderingCommand(),
		appendCommand(), queryCommand(), tailCommand(),
		createStreamCommand(), createGroupCommand(), dropGroupCommand(), dropStreamCommand(),
		serveCommand(),
		versionCommand(),
	}
}

// The Rheo roles of docs/reference.md §9.
const (
	roleReader   = "rheo_reader"
	roleProducer = "rheo_producer"
	roleAdmin    = "rheo_admin"
)

// commandRole is the Rheo role that the functions a command calls are
// granted to (docs/reference.md §9), named when the database denies them.
// A command that changes a stream or a group needs rheo_admin; one that
// only reads needs rheo_reader.
func commandRole(name string) string {
	switch name {
	case "streams", "groups", "lag", "info", "leases", "dead-letters", "query", "tail", "retention", "serve":
		// retention with --max-age, and serve with --allow-actions, ask
		// for rheo_admin: see their commands.
		return roleReader
	case "append":
		return roleProducer
	}
	return roleAdmin
}

func findCommand(name string) *command {
	for _, cmd := range commands() {
		if cmd.name == name {
			return cmd
		}
	}
	return nil
}

// call is one run of a command: its arguments, its streams, and the
// database it works on.
type call struct {
	ctx    context.Context
	args   []string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// json is set by --output json.
	json bool
	// databaseURL is --database-url, else $DATABASE_URL.
	databaseURL string
	// urlFromEnv: databaseURL came from $DATABASE_URL.
	urlFromEnv bool
	// target is databaseURL parsed, once open has been called.
	target dburl.Target
	// wrap is Options.WrapDriver.
	wrap func(driver.Driver) driver.Driver
	// stream and group are the names the command works on, for messages.
	stream, group string
	// role is the Rheo role the command needs, for messages: the
	// command's, or rheo_admin when its flags ask for more.
	role string
	// argFlags maps the names of the SQL arguments that the command's
	// flags fill to the flags, for the database's refusals.
	argFlags map[string]string
}

// Options are the optional settings of RunWith. A nil *Options means the
// defaults.
type Options struct {
	// WrapDriver, when set, wraps every driver a command opens, for
	// instance with a tracing driver. A wrapper that does not implement
	// driver.Transactor makes replay and prune --dry-run refuse. Defaults
	// to nil: the driver connect.Open returns.
	WrapDriver func(driver.Driver) driver.Driver
}

// Main is the rheo program: it runs the command line of the process
// (os.Args) with its standard streams, interrupted by SIGINT or SIGTERM,
// and exits with Run's status. A program that links more drivers, such
// as the rheo command of the Redis driver's module, is a main function
// that imports them and calls Main.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run executes one command line (the arguments after the program name)
// and returns the exit status: ExitOK, ExitFailure with one line on
// stderr, or ExitUsage with what is wrong and the usage on stderr. stdin
// may be nil, which reads as empty. Cancelling ctx interrupts the
// command; tail --follow then ends with ExitOK.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return RunWith(ctx, args, stdin, stdout, stderr, nil)
}

// RunWith is Run with options, for programs that embed the rheo command.
// opts may be nil.
func RunWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, opts *Options) int {
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	if opts == nil {
		opts = &Options{}
	}
	if len(args) == 0 {
		writeUsage(stderr)
		return ExitUsage
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(args, stdout, stderr)
	case "-version", "--version":
		name = "version"
	}
	cmd := findCommand(name)
	if cmd == nil {
		fmt.Fprintf(stderr, "rheo: %s; list the commands with: rheo help\n", unknownCommand(name))
		return ExitUsage
	}

	c := &call{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, wrap: opts.WrapDriver, role: commandRole(cmd.name)}
	fs := newFlagSet(cmd, c)
	fs.SetOutput(io.Discard)
	runCmd := cmd.define(fs)
	positional, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		writeCommandHelp(stdout, cmd)
		return ExitOK
	}
	if err == nil {
		err = checkArgs(cmd, positional)
	}
	if err != nil {
		writeUsageError(stderr, cmd, err.Error())
		return ExitUsage
	}
	c.args = positional
	if err := runCmd(c); err != nil {
		// Messages quote names and the server's words, which may hold
		// stored text: escape what a terminal would act on.
		msg := textsafe.Visible(oneLine(c.describe(err)))
		if isUsage(err) {
			writeUsageError(stderr, cmd, msg)
			return ExitUsage
		}
		fmt.Fprintf(stderr, "rheo: %s\n", msg)
		return ExitFailure
	}
	return ExitOK
}

// writeUsageError prints what is wrong with a command line and how to
// call the command.
func writeUsageError(w io.Writer, cmd *command, msg string) {
	fmt.Fprintf(w, "rheo %s: %s\nusage: %s\nsee: rheo %s -h\n", cmd.name, msg, usageLine(cmd), cmd.name)
}

// newFlagSet returns the flag set of cmd with the flags every database
// command shares.
func newFlagSet(cmd *command, c *call) *flag.FlagSet {
	fs := flag.NewFlagSet("rheo "+cmd.name, flag.ContinueOnError)
	if !cmd.noDB {
		fs.Func("database-url", "database `URL`: "+connect.Forms()+"; defaults to $"+EnvDatabaseURL, func(s string) error {
			c.databaseURL = s
			return nil
		})
	}
	if !cmd.noOutput {
		fs.Func("output", "output `format`: table or json; defaults to table", func(s string) error {
			switch s {
			case "table":
				c.json = false
			case "json":
				c.json = true
			default:
				return fmt.Errorf("want table or json, got %q", s)
			}
			return nil
		})
	}
	return fs
}

// parseInterspersed parses flags that may come before, between or after
// the positional arguments, which the flag package alone stops at. After
// "--" everything is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func checkArgs(cmd *command, got []string) error {
	want := cmd.args
	variadic := len(want) > 0 && want[len(want)-1] == "..."
	if variadic {
		want = want[:len(want)-1]
	}
	switch {
	case len(got) < len(want):
		return fmt.Errorf("missing %s", strings.Join(want[len(got):], " "))
	case len(got) > len(want) && !variadic:
		return fmt.Errorf("unexpected argument %q", got[len(want)])
	}
	return nil
}

// usageError is a command line that parses but makes no sense, such as
// two exclusive flags together. Run prints it with the usage line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// failure is an error whose message is already what a person should read.
type failure struct {
	msg string
	// usage: the failure comes from the command line (a flag the
	// database refused), so Run exits with ExitUsage.
	usage bool
}

func (e *failure) Error() string { return e.msg }

func failf(format string, args ...any) error {
	return &failure{msg: fmt.Sprintf(format, args...)}
}

// open connects to the database named by --database-url or
// $DATABASE_URL, running no migration. The caller closes the driver.
func (c *call) open() (driver.Driver, error) {
	raw := c.databaseURL
	if raw == "" {
		raw, c.urlFromEnv = os.Getenv(EnvDatabaseURL), true
	}
	if raw == "" {
		return nil, usagef("no database given: pass --database-url URL or set %s (%s)", EnvDatabaseURL, connect.Forms())
	}
	// The schemes of the drivers linked into this build (package
	// connect's registry) are accepted beside PostgreSQL's and SQLite's.
	target, err := dburl.ParseAlso(raw, connect.Schemes())
	if err != nil {
		return nil, &connect.URLError{Err: err}
	}
	c.databaseURL, c.target = raw, target
	if target.Kind == dburl.SQLite && sqlite.DefaultDriverName() == "" {
		return nil, errNoSQLite
	}
	drv, err := connect.Open(c.ctx, raw, nil)
	if err != nil {
		return nil, err
	}
	if c.wrap != nil {
		drv = c.wrap(drv)
	}
	return drv, nil
}

// databaseName names the kind of database c works on, for messages:
// PostgreSQL, SQLite, or the scheme of a registered driver (redis).
func (c *call) databaseName() string {
	if c.target.Kind == dburl.Registered {
		return c.target.Scheme
	}
	return c.target.Kind.String()
}

// errNoSQLite refuses an SQLite URL in a build of rheo that links no
// SQLite driver (CGO_ENABLED=0 without the tag rheo_modernc).
var errNoSQLite = failf("this build of rheo has no SQLite driver: %s; or use a PostgreSQL database: --database-url postgres://…",
	sqlite.BuildHint)

// oneLine joins a message's lines and spaces into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// intFlag is an integer flag whose refusals say what was wrong: the flag
// package's own integer flags say "parse error".
type intFlag[T int | int64] struct{ p *T }

func (f *intFlag[T]) String() string {
	if f == nil || f.p == nil {
		return "0"
	}
	return strconv.FormatInt(int64(*f.p), 10)
}

func (f *intFlag[T]) Set(s string) error {
	var zero T
	bits := 64
	if _, isInt := any(zero).(int); isInt {
		bits = strconv.IntSize
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if errors.Is(err, strconv.ErrRange) {
		return errors.New("out of range")
	}
	if err != nil {
		return errors.New("not an integer")
	}
	*f.p = T(n)
	return nil
}

// intVar defines an integer flag with the default value, stored in p.
func intVar[T int | int64](fs *flag.FlagSet, p *T, name string, value T, usage string) {
	*p = value
	fs.Var(&intFlag[T]{p}, name, usage)
}

// intFlagOf defines an integer flag with the default value and returns
// where it is stored.
func intFlagOf(fs *flag.FlagSet, name string, value int, usage string) *int {
	p := new(int)
	intVar(fs, p, name, value, usage)
	return p
}

// intList is a flag that collects integers, repeated or comma-separated.
type intList []int

func (l *intList) String() string { return fmt.Sprint([]int(*l)) }

func (l *intList) Set(s string) error {
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil {
			return fmt.Errorf("not an integer: %q", part)
		}
		*l = append(*l, n)
	}
	return nil
}

// sorted returns the list in ascending order without repeats, or nil when
// it is empty (which the drivers read as all partitions).
func (l intList) sorted() []int {
	if len(l) == 0 {
		return nil
	}
	s := slices.Clone([]int(l))
	slices.Sort(s)
	return slices.Compact(s)
}

// stringList is a flag that collects strings, one per use.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// optionalInt64 is an integer flag that records whether it was given.
type optionalInt64 struct {
	value *int64
}

func (o *optionalInt64) String() string {
	if o.value == nil {
		return ""
	}
	return strconv.FormatInt(*o.value, 10)
}

func (o *optionalInt64) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %q", s)
	}
	o.value = &n
	return nil
}

// optionalTime is a timestamp flag in RFC 3339 that records whether it
// was given.
type optionalTime struct {
	value *time.Time
}

func (o *optionalTime) String() string {
	if o.value == nil {
		return ""
	}
	return o.value.Format(time.RFC3339Nano)
}

func (o *optionalTime) Set(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("not an RFC 3339 time such as 2026-01-02T15:04:05Z: %q", s)
	}
	o.value = &t
	return nil
}
