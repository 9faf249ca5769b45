//go:build rheo_modernc

package sqlite

// The build tag rheo_modernc links modernc.org/sqlite, SQLite translated
// to Go, in place of github.com/mattn/go-sqlite3 (mattn.go): a program
// with SQLite that builds with CGO_ENABLED=0 and needs no C compiler.
// The driver registers itself as DriverModernc and is then the default.
import _ "modernc.org/sqlite"
