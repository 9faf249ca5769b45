package sqlite

import (
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/rheo-go/rheo"
)

// The names that the SQLite drivers for database/sql which the Driver
// runs on register themselves under.
const (
	// DriverMattn is github.com/mattn/go-sqlite3, SQLite's C code built
	// with cgo: the default wherever it is linked. This package links it
	// when cgo is on (CGO_ENABLED=1, a C compiler at hand) and the build
	// tag rheo_modernc is not set.
	DriverMattn = "sqlite3"
	// DriverModernc is modernc.org/sqlite, SQLite's C code translated to
	// Go: no cgo. This package links it with the build tag rheo_modernc;
	// a program may also import it itself.
	DriverModernc = "sqlite"
)

// BuildHint says how to build a program with an SQLite driver.
const BuildHint = "build with CGO_ENABLED=1 (github.com/mattn/go-sqlite3, needs a C compiler such as gcc) " +
	"or with -tags rheo_modernc (modernc.org/sqlite, pure Go)"

// ErrNoDriver is the cause of Open's error in a program that links no
// SQLite driver: one built with CGO_ENABLED=0 and without the build tag
// rheo_modernc. Open wraps it in a *rheo.FailedError; find it with
// errors.Is.
var ErrNoDriver = errors.New("this program has no SQLite driver: " + BuildHint)

// DefaultDriverName returns the database/sql driver that Open uses when
// Options.DriverName is empty: DriverMattn when this package was built
// with it, else DriverModernc when modernc.org/sqlite is linked into the
// program, else "" (then Open fails with ErrNoDriver).
func DefaultDriverName() string {
	for _, name := range []string{DriverMattn, DriverModernc} {
		if _, err := registered(name); err == nil {
			return name
		}
	}
	return ""
}

// A backend is an SQLite driver for database/sql that the Driver knows
// how to configure and whose errors it can read.
type backend struct {
	// pkg is the import path of the driver's package; a *sql.DB's driver
	// is recognised by it.
	pkg string
	// dsn adds Rheo's connection settings to a DSN (see dsnParams),
	// leaving those it already sets as they are.
	dsn func(dsn string) string
	// code returns the SQLite result code of err (or of an error it
	// wraps), primary code only, and whether it has one.
	code func(err error) (int, bool)
}

// backends are the SQLite drivers this build can run on. modernc.org/sqlite
// is always among them: its errors are read through a method, with no
// import of the package. The file of the cgo build adds mattn's.
var backends = []*backend{{pkg: "modernc.org/sqlite", dsn: moderncDSN, code: codeMethod}}

// SQLite's primary result codes that interpretError tells apart.
const (
	codeError      = 1  // SQLITE_ERROR
	codePerm       = 3  // SQLITE_PERM
	codeBusy       = 5  // SQLITE_BUSY
	codeLocked     = 6  // SQLITE_LOCKED
	codeNoMem      = 7  // SQLITE_NOMEM
	codeReadOnly   = 8  // SQLITE_READONLY
	codeFull       = 13 // SQLITE_FULL
	codeCantOpen   = 14 // SQLITE_CANTOPEN
	codeConstraint = 19 // SQLITE_CONSTRAINT
	codeAuth       = 23 // SQLITE_AUTH
)

// resultCode returns the primary SQLite result code carried by err.
func resultCode(err error) (int, bool) {
	for _, b := range backends {
		if code, ok := b.code(err); ok {
			return code, true
		}
	}
	return 0, false
}

// codeMethod reads modernc.org/sqlite's *Error, whose Code method gives
// the extended result code: its low byte is the primary one.
func codeMethod(err error) (int, bool) {
	var coded interface {
		error
		Code() int
	}
	if !errors.As(err, &coded) {
		return 0, false
	}
	return coded.Code() & 0xff, true
}

// backendOf returns the backend of the database/sql driver drv, or an
// error that names it.
func backendOf(drv sqldriver.Driver) (*backend, error) {
	t := reflect.TypeOf(drv)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pkg := ""
	if t != nil {
		pkg = t.PkgPath()
	}
	for _, b := range backends {
		if b.pkg == pkg {
			return b, nil
		}
	}
	if pkg == mattnPkg {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument,
			"db uses %s, which this build of package sqlite was built without (CGO_ENABLED=0 or the tag rheo_modernc)", pkg)
	}
	return nil, rheo.Errorf(rheo.ErrInvalidArgument, "db uses %T, not %s or modernc.org/sqlite", drv, mattnPkg)
}

const mattnPkg = "github.com/mattn/go-sqlite3"

// registered returns the backend of the database/sql driver registered
// as name.
func registered(name string) (*backend, error) {
	if !slices.Contains(sql.Drivers(), name) {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "no database/sql driver %q is registered", name)
	}
	// sql.Open connects to nothing; it only looks the driver up.
	db, err := sql.Open(name, "")
	if err != nil {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "database/sql driver %q: %v", name, err)
	}
	defer db.Close()
	b, err := backendOf(db.Driver())
	if err != nil {
		return nil, fmt.Errorf("database/sql driver %q: %w", name, err)
	}
	return b, nil
}

// The connection settings Open gives every database, for each driver;
// settings the DSN already has take precedence. BEGIN IMMEDIATE for every
// transaction makes an operation take the write lock before it reads
// (waiting up to the busy timeout for it), so it never fails to upgrade
// a read lock half-way. WAL lets readers in other processes work while
// one writes, and synchronous=NORMAL (safe in WAL mode) keeps committed
// transactions through a process crash with one fsync per checkpoint
// rather than per commit; an in-memory database ignores both.
const (
	busyTimeoutMS = "5000"
	journalMode   = "WAL"
	synchronous   = "NORMAL"
)

// withParams appends params to dsn's query.
func withParams(dsn, params string) string {
	if params == "" {
		return dsn
	}
	if strings.Contains(dsn, "?") {
		return dsn + "&" + params
	}
	return dsn + "?" + params
}

// dsnQuery parses the query of dsn, empty when it has none or when it
// does not parse (the driver then reports it).
func dsnQuery(dsn string) url.Values {
	_, query, ok := strings.Cut(dsn, "?")
	if !ok {
		return url.Values{}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return url.Values{}
	}
	return q
}

// moderncDSN adds Rheo's settings as modernc.org/sqlite reads them:
// _txlock, and PRAGMAs in _pragma=name(value), which every release of the
// driver accepts (recent ones also read mattn's _busy_timeout, …). A
// setting is left out when the DSN makes it, in either form: the driver
// runs every _pragma it is given, in name order, so the DSN's would not
// otherwise come last.
func moderncDSN(dsn string) string {
	q := dsnQuery(dsn)
	sets := func(pragma string, keys ...string) bool {
		for _, k := range keys {
			if q.Has(k) {
				return true
			}
		}
		for _, v := range q["_pragma"] {
			name, _, _ := strings.Cut(strings.TrimSpace(v), "(")
			name, _, _ = strings.Cut(name, "=")
			if strings.EqualFold(strings.TrimSpace(name), pragma) {
				return true
			}
		}
		return false
	}
	var params []string
	if !q.Has("_txlock") {
		params = append(params, "_txlock=immediate")
	}
	for _, p := range []struct{ pragma, value string }{
		{"busy_timeout", busyTimeoutMS},
		{"journal_mode", journalMode},
		{"synchronous", synchronous},
	} {
		short := "_" + p.pragma
		alias := map[string]string{"busy_timeout": "_timeout", "journal_mode": "_journal", "synchronous": "_sync"}[p.pragma]
		if !sets(p.pragma, short, alias) {
			params = append(params, "_pragma="+p.pragma+"("+p.value+")")
		}
	}
	return withParams(dsn, strings.Join(params, "&"))
}
