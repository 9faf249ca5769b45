package testcitus

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo/internal/testdb"
	"github.com/rheo-go/rheo/internal/testskip"
	"github.com/rheo-go/rheo/migrate"
)

// NewRheoCopy returns the URL, as the superuser, of a database of its
// own for t with Rheo installed distributed, as NewRheo installs it, but
// without an application role: a copy, on every node, of a database
// where Rheo was installed once per test binary. Citus keeps a
// database's metadata and shards in the database of each node, so that
// the copies are clusters of their own, with the same nodes registered
// and the same shards placed. A copy takes a fraction of a second, an
// install seconds. It drops the database on every node when t ends.
func (c *Cluster) NewRheoCopy(t testing.TB) string {
	t.Helper()
	c.rheoTemplateOnce.Do(func() { c.rheoTemplate, c.rheoTemplateErr = c.makeRheoTemplate() })
	require.NoError(t, c.rheoTemplateErr, "make the Citus template database with Rheo installed")
	return c.copyEverywhere(t, c.rheoTemplate)
}

// makeRheoTemplate creates the database NewRheoCopy copies: a copy of
// the template of NewDatabase, registered and with Rheo installed, which
// refuses connections once made. It is dropped when the test binary
// ends.
func (c *Cluster) makeRheoTemplate() (string, error) {
	c.templateOnce.Do(func() { c.template, c.templateErr = c.makeTemplate() })
	if c.templateErr != nil {
		return "", c.templateErr
	}
	ctx := context.Background()
	name := templatePrefix + "rheo_" + randomSuffix()
	testskip.AtExit(func() {
		if err := c.dropEverywhere(ctx, name); err != nil {
			fmt.Printf("rheo tests: drop the Citus template database %s: %v\n", name, err)
		}
	})
	nodes := c.nodes()
	ident := pgx.Identifier{name}.Sanitize()
	err := parallel(len(nodes), func(i int) error {
		admin := c.adminURL(nodes[i])
		err := execSQL(ctx, admin, "CREATE DATABASE "+ident+" TEMPLATE "+pgx.Identifier{c.template}.Sanitize())
		if err == nil {
			err = execSQL(ctx, admin, "COMMENT ON DATABASE "+ident+" IS "+quoteLiteral(testdb.TemplateOwner()))
		}
		if err != nil {
			return fmt.Errorf("on %s: %w", nodes[i].Addr(), err)
		}
		return nil
	})
	if err == nil {
		err = c.installRheo(ctx, c.URL(c.Coordinator, name))
	}
	// The coordinator's backends, and its maintenance daemon, hold the
	// connections to the workers: it is closed first.
	if err == nil {
		err = closeTemplate(ctx, c.adminURL(c.Coordinator), name)
	}
	if err == nil {
		err = parallel(len(c.Workers), func(i int) error {
			if err := closeTemplate(ctx, c.adminURL(c.Workers[i]), name); err != nil {
				return fmt.Errorf("on %s: %w", c.Workers[i].Addr(), err)
			}
			return nil
		})
	}
	return name, err
}

// installRheo registers the nodes in the database at u, as Register
// does, and installs Rheo there.
func (c *Cluster) installRheo(ctx context.Context, u string) error {
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "SELECT citus_set_coordinator_host($1, $2)", c.Coordinator.Host, c.Coordinator.Port)
	for _, w := range c.Workers {
		if err != nil {
			break
		}
		_, err = conn.Exec(ctx, "SELECT citus_add_node($1, $2)", w.Host, w.Port)
	}
	if err != nil {
		return fmt.Errorf("register the nodes: %w", err)
	}
	if err := migrate.Postgres(ctx, conn, nil); err != nil {
		return fmt.Errorf("install Rheo: %w", err)
	}
	return nil
}
