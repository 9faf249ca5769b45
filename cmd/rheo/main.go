// Command rheo runs the Rheo demo and the operations on a Rheo database:
//
//	rheo demo                                  a guided scenario on a temporary SQLite file
//	rheo streams | groups | lag | info | dead-letters | replay | reset
//	rheo retention | prune
//	rheo append | query | tail | create-stream | create-group | drop-group | drop-stream
//
// Database commands take --database-url (or $DATABASE_URL): postgres://…,
// postgresql://…, sqlite:///abs/path.db, sqlite://relative/path.db. Run
// "rheo help" for the list of commands and "rheo COMMAND -h" for one.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/rheo-go/rheo/cmd/rheo/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
