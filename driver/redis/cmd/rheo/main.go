// Command rheo is the rheo command (cmd/rheo: the demo, the operations,
// tail, and serve with its dashboard) with the Redis Streams driver
// linked in beside PostgreSQL's and SQLite's, so that every database
// command takes redis://host:port/db and rediss://… URLs too:
//
//	go run ./cmd/rheo lag orders billing --database-url redis://127.0.0.1:6379/0
//
// It lives in the Redis driver's module so that the root module, and the
// rheo built from it, do not depend on go-redis. Run "rheo help" for the
// commands; docs/redis.md says what each does on Redis.
package main

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/rheo-go/rheo/cmd/rheo/cli"

	// The Redis driver registers its URL schemes with package connect.
	_ "github.com/rheo-go/rheo/driver/redis"
)

// quiet drops go-redis's own log lines (a connection pool that failed to
// dial, say): the command reports every failure in one line of its own,
// which those lines would repeat in go-redis's words.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	goredis.SetLogger(quiet{})
	cli.Main()
}
