package postgres_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStreamInfo(t *testing.T) {
	t.Parallel()
	d, pool := setup(t)
	ctx := t.Context()
	require.NoError(t, d.CreateStream(ctx, "s", 1))
	for sql, want := range map[string]time.Duration{
		"interval '1 mon 2 days 03:00:00.5'": (30+2)*24*time.Hour + 3*time.Hour + 500*time.Millisecond,
		"interval '2 weeks'":                 14 * 24 * time.Hour,
		"interval '1 day -1 hour'":           23 * time.Hour,
		"interval '300 years'":               time.Duration(1<<63 - 1),
	} {
		t.Run("a retention of "+sql+" set in SQL reads as "+want.String(), func(t *testing.T) {
			_, err := pool.Exec(ctx, "SELECT rheo.set_retention('s', "+sql+")")
			require.NoError(t, err)
			info, err := d.StreamInfo(ctx, "s")
			require.NoError(t, err)
			require.Equal(t, want, info.MaxAge)
		})
	}
}
