// Package rheosql embeds Rheo's SQL: the PostgreSQL schema migrations, the
// PostgreSQL functions, the distribution on a Citus cluster, and the
// SQLite schema migrations. Package migrate
// applies them; hosts with their own migration tool can read them here.
package rheosql

import (
	"embed"
	"io/fs"
)

//go:embed schema/*.sql
var schema embed.FS

//go:embed functions/*.sql
var functions embed.FS

//go:embed sqlite/*.sql
var sqlite embed.FS

// Citus distributes an installed Rheo on a Citus cluster: run after the
// schema migrations and the functions in a database with the citus
// extension, it makes the per-stream tables distributed by the stream,
// the small global ones reference tables, and puts every function on
// every node. It changes nothing where that is done already, or without
// citus.
//
//go:embed citus/distribute.sql
var Citus string

// Schema holds the PostgreSQL migrations, NNN_name.sql, applied once each
// in version order.
var Schema = sub(schema, "schema")

// Functions holds the PostgreSQL functions and triggers, one per file, all
// CREATE OR REPLACE and reinstalled together whenever one changes. Files
// are installed in lexical order; helpers are named _name.sql so they come
// first.
var Functions = sub(functions, "functions")

// SQLite holds the SQLite migrations, NNN_name.sql, with the same version
// numbers as Schema.
var SQLite = sub(sqlite, "sqlite")

func sub(fsys embed.FS, dir string) fs.FS {
	f, err := fs.Sub(fsys, dir)
	if err != nil {
		// fs.Sub fails only for an invalid path, and dir is a constant.
		panic(err)
	}
	return f
}
