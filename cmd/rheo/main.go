// Command rheo runs the Rheo demo and the operations on a Rheo database:
//
//	rheo demo                                  a guided scenario on a temporary SQLite file
//	rheo streams | groups | lag | info | dead-letters | replay | reset
//	rheo retention | prune
//	rheo append | query | tail | create-stream | create-group | drop-group | drop-stream
//	rheo serve                                 the dashboard
//
// Database commands take --database-url (or $DATABASE_URL): postgres://…,
// postgresql://…, sqlite:///abs/path.db, sqlite://relative/path.db. Run
// "rheo help" for the list of commands and "rheo COMMAND -h" for one.
//
// This build links the PostgreSQL and SQLite drivers. The same command
// on Redis is github.com/rheo-go/rheo/driver/redis/cmd/rheo, in the
// Redis driver's module, which links the Redis driver too
// (docs/redis.md).
package main

import "github.com/rheo-go/rheo/cmd/rheo/cli"

func main() {
	cli.Main()
}
