package tests

// The pure-Go SQLite driver, registered as "sqlite" (sqlite.DriverModernc)
// beside mattn's "sqlite3", so that the conformance suite and the driver
// benchmarks run on both in the one test binary. Only tests import it;
// programs get it with the build tag rheo_modernc (driver/sqlite/modernc.go).
import _ "modernc.org/sqlite"
