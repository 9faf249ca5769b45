package testdb

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// TemplateOwner is what a template database's comment says of the test
// binary that made it: the host and the process, so that a later binary
// can tell a template left by one that was killed (DropOrphanTemplates).
func TemplateOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s %s%d", host, ownerPID, os.Getpid())
}

// ownerPID precedes the process id in a template's comment.
const ownerPID = "pid "

// DropOrphanTemplates drops the databases on the server at admin whose
// names begin with prefix and whose comment (TemplateOwner) names a
// process of this host that has ended without dropping them (killed, or
// interrupted by ^C). Those of other hosts, of processes still running,
// or without such a comment are kept; a server that cannot be read is
// left as it is.
func DropOrphanTemplates(ctx context.Context, admin, prefix string) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT datname, coalesce(shobj_description(oid, 'pg_database'), '')
		FROM pg_database WHERE starts_with(datname, $1)`, prefix)
	if err != nil {
		return
	}
	var orphans []string
	host, _ := os.Hostname()
	var name, comment string
	if _, err := pgx.ForEachRow(rows, []any{&name, &comment}, func() error {
		h, pid, ok := strings.Cut(comment, " "+ownerPID)
		if n, err := strconv.Atoi(pid); ok && h == host && err == nil && !Alive(n) {
			orphans = append(orphans, name)
		}
		return nil
	}); err != nil {
		return
	}
	for _, name := range orphans {
		_ = DropDatabase(ctx, admin, name)
	}
}
