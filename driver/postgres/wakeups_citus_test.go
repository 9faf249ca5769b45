package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestNodeConfig(t *testing.T) {
	t.Run("a node's connection has the node's host and port and the rest of the listener's settings", func(t *testing.T) {
		base, err := pgx.ParseConfig("postgres://app:secret@coordinator:6432/db?sslmode=disable&application_name=svc&search_path=x")
		require.NoError(t, err)
		c := nodeConfig(base, "worker-1", 5433)
		require.Equal(t, "worker-1", c.Host)
		require.Equal(t, uint16(5433), c.Port)
		require.Equal(t, "app", c.User)
		require.Equal(t, "secret", c.Password)
		require.Equal(t, "db", c.Database)
		require.Equal(t, map[string]string{"application_name": "svc", "search_path": "x"}, c.RuntimeParams)
		require.Nil(t, c.TLSConfig)
		require.Empty(t, c.Fallbacks)
		require.Equal(t, "coordinator", base.Host, "the listener's config is left alone")
	})

	t.Run("TLS verifies the node's name, and sslmode=prefer still falls back to plain on the node", func(t *testing.T) {
		base, err := pgx.ParseConfig("postgres://app@coordinator:6432/db?sslmode=prefer")
		require.NoError(t, err)
		require.NotEmpty(t, base.Fallbacks)
		c := nodeConfig(base, "worker-1", 5433)
		require.NotNil(t, c.TLSConfig)
		for _, f := range c.Fallbacks {
			require.Equal(t, "worker-1", f.Host)
			require.Equal(t, uint16(5433), f.Port)
		}
		require.Equal(t, len(base.Fallbacks), len(c.Fallbacks))

		base, err = pgx.ParseConfig("postgres://app@coordinator:6432/db?sslmode=verify-full")
		require.NoError(t, err)
		require.Equal(t, "coordinator", base.TLSConfig.ServerName)
		c = nodeConfig(base, "worker-1", 5433)
		require.Equal(t, "worker-1", c.TLSConfig.ServerName)
		require.Equal(t, "coordinator", base.TLSConfig.ServerName, "the listener's config is left alone")
	})

	t.Run("fallbacks to other hosts are dropped", func(t *testing.T) {
		base, err := pgx.ParseConfig("postgres://app@coordinator:6432,standby:6432/db?sslmode=disable")
		require.NoError(t, err)
		require.NotEmpty(t, base.Fallbacks)
		c := nodeConfig(base, "worker-1", 5433)
		require.Empty(t, c.Fallbacks)
		require.Len(t, base.Fallbacks, 1, "the listener's config is left alone")
	})
}
