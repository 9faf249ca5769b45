package sqlite_test

import (
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	// The pure-Go SQLite driver, registered as "sqlite" beside mattn's
	// "sqlite3": these tests run on both. Programs get it with the build
	// tag rheo_modernc.
	_ "modernc.org/sqlite"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/sqlite"
)

// sqliteDrivers are the database/sql drivers the Driver runs on, each with
// the DSN settings a host gives it to open a file as Open does, less
// _txlock=immediate (so transactions begin DEFERRED).
var sqliteDrivers = []struct {
	label, name, pkg string
	// hostParams are WAL and a 5 s busy timeout in the driver's form.
	hostParams string
	// shortTimeout sets a 100 ms busy timeout in the driver's form.
	shortTimeout string
}{
	{"mattn", sqlite.DriverMattn, "github.com/mattn/go-sqlite3", "_journal_mode=WAL&_busy_timeout=5000", "_busy_timeout=100"},
	{"modernc", sqlite.DriverModernc, "modernc.org/sqlite", "_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)", "_pragma=busy_timeout(100)"},
}

func TestDrivers(t *testing.T) {
	t.Run("cgo builds default to mattn's driver", func(t *testing.T) {
		require.Equal(t, sqlite.DriverMattn, sqlite.DefaultDriverName())
		b := setup(t)
		d := b.open(t, ":memory:")
		require.Equal(t, "github.com/mattn/go-sqlite3", driverPkg(d.DB()))
	})

	t.Run("a driver name that is not registered is invalid_argument", func(t *testing.T) {
		b := setup(t)
		_, err := sqlite.Open(b.ctx, ":memory:", &sqlite.Options{DriverName: "no-such-driver"})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		require.ErrorContains(t, err, `"no-such-driver"`)
	})

	t.Run("a database/sql driver that is not SQLite is refused", func(t *testing.T) {
		b := setup(t)
		_, err := sqlite.Open(b.ctx, ":memory:", &sqlite.Options{DriverName: fakeDriverName})
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		db, err := sql.Open(fakeDriverName, "")
		require.NoError(t, err)
		defer db.Close()
		_, err = sqlite.New(db, nil)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument)
		require.ErrorContains(t, err, "not github.com/mattn/go-sqlite3 or modernc.org/sqlite")
	})

	for _, drv := range sqliteDrivers {
		t.Run(drv.label, func(t *testing.T) {
			open := func(t *testing.T, b *testBundle, dsn string) *sqlite.Driver {
				t.Helper()
				d, err := sqlite.Open(b.ctx, dsn, &sqlite.Options{Clock: b.clock, Migrate: true, DriverName: drv.name})
				require.NoError(t, err)
				t.Cleanup(func() { _ = d.Close() })
				return d
			}

			t.Run("Open uses the driver named", func(t *testing.T) {
				b := setup(t)
				require.Equal(t, drv.pkg, driverPkg(open(t, b, ":memory:").DB()))
			})

			t.Run("a file is opened in WAL mode with a busy timeout and synchronous NORMAL", func(t *testing.T) {
				b := setup(t)
				d := open(t, b, b.path)
				var mode string
				var timeout, sync int
				require.NoError(t, d.DB().QueryRowContext(b.ctx, `PRAGMA journal_mode`).Scan(&mode))
				require.NoError(t, d.DB().QueryRowContext(b.ctx, `PRAGMA busy_timeout`).Scan(&timeout))
				require.NoError(t, d.DB().QueryRowContext(b.ctx, `PRAGMA synchronous`).Scan(&sync))
				require.Equal(t, "wal", mode)
				require.Equal(t, 5000, timeout)
				require.Equal(t, 1, sync, "NORMAL")
			})

			t.Run("parameters in the dsn take precedence", func(t *testing.T) {
				b := setup(t)
				d := open(t, b, "file:"+b.path+"?"+drv.shortTimeout)
				var timeout int
				require.NoError(t, d.DB().QueryRowContext(b.ctx, `PRAGMA busy_timeout`).Scan(&timeout))
				require.Equal(t, 100, timeout)
			})

			t.Run("transactions begin IMMEDIATE", func(t *testing.T) {
				b := setup(t)
				d := open(t, b, b.path)
				tx, err := d.DB().BeginTx(b.ctx, nil)
				require.NoError(t, err)
				defer tx.Rollback()
				// Another connection cannot write while tx, which has only
				// begun, holds the write lock.
				other, err := sql.Open(drv.name, b.path+"?"+drv.shortTimeout)
				require.NoError(t, err)
				defer other.Close()
				_, err = other.ExecContext(b.ctx, `CREATE TABLE t (x)`)
				require.Error(t, err)
				require.ErrorContains(t, err, "locked")
			})

			t.Run("a database that cannot be opened is backend_unavailable", func(t *testing.T) {
				b := setup(t)
				_, err := sqlite.Open(b.ctx, b.path+"/missing/rheo.db", &sqlite.Options{DriverName: drv.name})
				require.ErrorIs(t, err, rheo.ErrBackendUnavailable)
			})

			t.Run("a write lock held beyond the busy timeout is backend_unavailable", func(t *testing.T) {
				b := setup(t)
				d := open(t, b, "file:"+b.path+"?"+drv.shortTimeout)
				b.streamWithGroup(t, d, "s", 1)
				other, err := sql.Open(drv.name, b.path)
				require.NoError(t, err)
				defer other.Close()
				conn, err := other.Conn(b.ctx)
				require.NoError(t, err)
				defer conn.Close()
				_, err = conn.ExecContext(b.ctx, `BEGIN IMMEDIATE`)
				require.NoError(t, err)

				_, err = d.Append(b.ctx, "s", payload(1), nil)
				require.ErrorIs(t, err, rheo.ErrBackendUnavailable)

				_, err = conn.ExecContext(b.ctx, `ROLLBACK`)
				require.NoError(t, err)
				_, err = d.Append(b.ctx, "s", payload(1), nil)
				require.NoError(t, err, "the lock is free again")
			})

			t.Run("host databases with deferred transactions still append in order", func(t *testing.T) {
				b := setup(t)
				open(t, b, b.path) // migrates the file
				var drivers []*sqlite.Driver
				for range 2 {
					db, err := sql.Open(drv.name, b.path+"?"+drv.hostParams)
					require.NoError(t, err)
					t.Cleanup(func() { _ = db.Close() })
					d, err := sqlite.New(db, &sqlite.Options{Clock: b.clock})
					require.NoError(t, err)
					drivers = append(drivers, d)
				}
				require.NoError(t, drivers[0].CreateStream(b.ctx, "s", 1))
				const writers, each = 4, 25
				var wg sync.WaitGroup
				errs := make([]error, writers)
				for w := range writers {
					wg.Go(func() {
						for i := range each {
							if _, err := drivers[w%2].Append(b.ctx, "s", payload(i), nil); err != nil {
								errs[w] = err
								return
							}
						}
					})
				}
				wg.Wait()
				for _, err := range errs {
					require.NoError(t, err, "a lost write lock is retried")
				}
				events, err := drivers[1].Read(b.ctx, "s", &rheo.ReadOptions{MaxCount: writers * each})
				require.NoError(t, err)
				require.Len(t, events, writers*each)
				for i, ev := range events {
					require.Equal(t, int64(i+1), ev.Sequence)
				}
			})
		})
	}
}

// driverPkg is the import path of db's database/sql driver.
func driverPkg(db *sql.DB) string {
	return reflect.TypeOf(db.Driver()).Elem().PkgPath()
}

// fakeDriverName is a database/sql driver that is not SQLite.
const fakeDriverName = "rheo-test-not-sqlite"

type fakeDriver struct{}

func (fakeDriver) Open(string) (sqldriver.Conn, error) { return nil, errors.New("not a database") }

func init() { sql.Register(fakeDriverName, fakeDriver{}) }
