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
	"github.com/rheo-go/rheo/cmd/rheo/cli"

	// The Redis driver registers the redis and rediss schemes with
	// package connect.
	_ "github.com/rheo-go/rheo/driver/redis"
)

func main() {
	cli.Main()
}
