package dburl

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedactedListenURL(t *testing.T) {
	for _, listen := range []string{
		"postgres://app:listen-secret@db:5432/app",
		"postgres://app@db:5432/app?password=listen-secret",
		"host=db user=app password=listen-secret",
	} {
		target, err := Parse("postgres://app:secret@pooler:6432/app?" + listenURLParam + "=" + url.QueryEscape(listen))
		require.NoError(t, err)
		got := target.Redacted()
		require.NotContains(t, got, "secret", "Redacted() = %q, want the URL without either password", got)
		require.Contains(t, got, "pooler:6432", "Redacted() = %q, want the URL without either password", got)
		require.Contains(t, got, listenURLParam, "Redacted() = %q, want the URL without either password", got)
	}
}

func TestRedact(t *testing.T) {
	tests := []struct {
		name, url, want string
	}{
		{"the userinfo's password", "postgres://app:secret@db:5432/app?sslmode=disable",
			"postgres://app:xxxxx@db:5432/app?sslmode=disable"},
		{"a password in the query", "postgres://app@db/app?sslmode=disable&password=secret",
			"postgres://app@db/app?sslmode=disable&password=xxxxx"},
		{"a password parameter spelled with escapes", "postgres://db/app?pass%77ord=secret",
			"postgres://db/app?pass%77ord=xxxxx"},
		{"a password parameter in capitals", "postgres://db/app?PASSWORD=secret",
			"postgres://db/app?PASSWORD=xxxxx"},
		{"the TLS key's password", "postgres://db/app?sslkey=/k.pem&sslpassword=secret",
			"postgres://db/app?sslkey=/k.pem&sslpassword=xxxxx"},
		{"both, and a fragment", "postgres://app:secret@db/app?password=secret#x",
			"postgres://app:xxxxx@db/app?password=xxxxx#x"},
		{"no password", "postgres://app@db/app", "postgres://app@db/app"},
		{"an @ in the query is no userinfo", "postgres://db/app?application_name=a@b&password=secret",
			"postgres://db/app?application_name=a@b&password=xxxxx"},
		{"a query before an @ is masked whole", "postgres://db?password=sec@ret",
			"postgres://xxxxx@ret"},
		{"not a URL", "host=db password=secret", "PostgreSQL URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Redact(tt.url)
			require.Equal(t, tt.want, got, "Redact(%q) = %q, want %q", tt.url, got, tt.want)
		})
	}
}

// TestParseSplitsUserinfoAsLibpq checks that a URL whose password libpq
// and net/url would read differently is refused without a piece of the
// password in the message: otherwise the piece reaches the messages as
// the host name pgx tried to look up.
func TestParseSplitsUserinfoAsLibpq(t *testing.T) {
	for _, raw := range []string{
		"postgres://app:sec@ret@db:5432/app",
		"postgres://app:sec?ret@db/app",
		"postgres://app:sec#ret@db/app",
		"postgres://app:sec/ret@db/app",
		"postgres://app:50%ret@db/app",
		"postgres://app:sec ret@db:port/app",
	} {
		_, err := Parse(raw)
		require.Error(t, err, "Parse(%q) accepted the URL", raw)
		msg := err.Error()
		require.NotContains(t, msg, "sec", "Parse(%q) error %q repeats a piece of the password", raw, msg)
		require.NotContains(t, msg, "ret", "Parse(%q) error %q repeats a piece of the password", raw, msg)
	}
	_, err := Parse("postgres://app:sec%40ret@db/app")
	require.NoError(t, err, "Parse of a percent-encoded @")
}
