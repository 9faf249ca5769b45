//go:build cgo && !rheo_modernc

package sqlite

import (
	"errors"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// This file links github.com/mattn/go-sqlite3, which compiles SQLite's C
// code with cgo, and makes it the default driver. Without cgo, or with
// the tag rheo_modernc (modernc.go), it is left out, and with it the C
// compiler the first build needs.

func init() {
	backends = append([]*backend{{pkg: mattnPkg, dsn: mattnDSN, code: mattnCode}}, backends...)
}

// mattnParams are Rheo's settings as mattn's DSN parameters; the driver
// reads the first value of each, so the DSN's own come first and win.
// The statement cache keeps the hot paths' statements prepared on the
// connection.
const mattnParams = "_txlock=immediate&_busy_timeout=" + busyTimeoutMS + "&_journal_mode=" + journalMode +
	"&_synchronous=" + synchronous + "&_stmt_cache_size=64"

func mattnDSN(dsn string) string { return withParams(dsn, mattnParams) }

// mattnCode reads mattn's sqlite3.Error, whose Code is the primary result
// code.
func mattnCode(err error) (int, bool) {
	var sqliteErr sqlite3.Error
	if !errors.As(err, &sqliteErr) {
		return 0, false
	}
	return int(sqliteErr.Code), true
}
