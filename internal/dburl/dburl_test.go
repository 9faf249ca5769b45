package dburl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		url  string
		want Target
	}{
		{"postgres URL is kept as the DSN", "postgres://u:pw@db:5432/app?sslmode=disable",
			Target{Kind: Postgres, DSN: "postgres://u:pw@db:5432/app?sslmode=disable"}},
		{"postgresql scheme is accepted", "postgresql://db/app",
			Target{Kind: Postgres, DSN: "postgresql://db/app"}},
		{"scheme is case-insensitive and lowered in the DSN", "POSTGRES://db/app",
			Target{Kind: Postgres, DSN: "postgres://db/app"}},
		{"sqlite with three slashes is an absolute path", "sqlite:///var/lib/app/rheo.db",
			Target{Kind: SQLite, Path: "/var/lib/app/rheo.db"}},
		{"sqlite with two slashes is a relative path", "sqlite://data/rheo.db",
			Target{Kind: SQLite, Path: "data/rheo.db"}},
		{"sqlite without slashes is a relative path", "sqlite:rheo.db",
			Target{Kind: SQLite, Path: "rheo.db"}},
		{"sqlite path is percent-decoded", "sqlite:///tmp/my%20db%3F.db",
			Target{Kind: SQLite, Path: "/tmp/my db?.db"}},
		{"sqlite memory", "sqlite::memory:", Target{Kind: SQLite, Memory: true}},
		{"sqlite memory with slashes", "sqlite://:memory:", Target{Kind: SQLite, Memory: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.url)
			require.NoError(t, err, "Parse(%q)", tt.url)
			require.Equal(t, tt.want, got, "Parse(%q) = %+v, want %+v", tt.url, got, tt.want)
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name  string
		url   string
		want  string // a fragment of the message
		forms bool   // the message lists the accepted forms
	}{
		{"an empty URL", "", "no database URL given", true},
		{"a path without a scheme", "/tmp/rheo.db", "has no scheme", true},
		{"a MySQL URL", "mysql://db/app", `unsupported database URL scheme "mysql"`, true},
		{"a key=value DSN", "host=db user=app", "has no scheme", true},
		{"postgres without slashes", "postgres:db", "must start with postgres://", false},
		{"a postgres URL with a bad port", "postgres://u:secret@db:port/app", "invalid PostgreSQL URL", false},
		{"sqlite without a path", "sqlite:", "names no database file", true},
		{"sqlite naming a directory", "sqlite:///tmp/", "names no database file", true},
		{"sqlite with a query", "sqlite:///tmp/rheo.db?mode=ro", "may not have a query", true},
		{"sqlite with a bad escape", "sqlite:///tmp/%zz.db", "invalid SQLite URL", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.url)
			require.Error(t, err, "Parse(%q) = %+v, want an error", tt.url, got)
			msg := err.Error()
			require.Contains(t, msg, tt.want, "Parse(%q) error %q does not contain %q", tt.url, msg, tt.want)
			require.NotContains(t, msg, "secret", "Parse(%q) error %q repeats the password", tt.url, msg)
			if tt.forms {
				require.Contains(t, msg, Forms, "Parse(%q) error %q does not name the accepted forms", tt.url, msg)
			}
		})
	}
}

func TestSQLiteDSN(t *testing.T) {
	tests := []struct {
		name   string
		target Target
		want   string
	}{
		{"an absolute file is a file: URI", Target{Kind: SQLite, Path: "/var/lib/rheo.db"},
			"file:/var/lib/rheo.db"},
		{"a relative file stays relative", Target{Kind: SQLite, Path: "data/rheo.db"},
			"file:data/rheo.db"},
		{"special characters are escaped", Target{Kind: SQLite, Path: "/tmp/a?b#c%d.db"},
			"file:/tmp/a%3Fb%23c%25d.db"},
		{"a leading double slash is not an authority", Target{Kind: SQLite, Path: "//tmp/x.db"},
			"file:/tmp/x.db"},
		{"memory", Target{Kind: SQLite, Memory: true}, ":memory:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.target.SQLiteDSN()
			require.Equal(t, tt.want, got, "SQLiteDSN() = %q, want %q", got, tt.want)
		})
	}
}

func TestRedacted(t *testing.T) {
	target, err := Parse("postgres://app:secret@db:5432/app")
	require.NoError(t, err)
	got := target.Redacted()
	require.NotContains(t, got, "secret", "Redacted() = %q, want the URL without its password", got)
	require.Contains(t, got, "db:5432", "Redacted() = %q, want the URL without its password", got)
	file, err := Parse("sqlite:///tmp/rheo.db")
	require.NoError(t, err)
	got = file.Redacted()
	require.Equal(t, "/tmp/rheo.db", got, "Redacted() = %q, want the path", got)
}

func TestParseAlso(t *testing.T) {
	registered := []string{"redis", "rediss"}

	t.Run("a registered scheme is a Registered target holding the URL as given", func(t *testing.T) {
		for _, raw := range []string{"redis://:secret@127.0.0.1:6380/2", "REDISS://host:6380/0"} {
			got, err := ParseAlso(raw, registered)
			require.NoError(t, err, "ParseAlso(%q)", raw)
			require.Equal(t, Target{Kind: Registered, Scheme: strings.ToLower(strings.SplitN(raw, ":", 2)[0]), DSN: raw}, got)
		}
	})

	t.Run("a Registered target is redacted like a PostgreSQL URL", func(t *testing.T) {
		got, err := ParseAlso("redis://user:secret@127.0.0.1:6380/2?password=again", registered)
		require.NoError(t, err)
		require.Equal(t, "redis://user:xxxxx@127.0.0.1:6380/2?password=xxxxx", got.Redacted())
	})

	t.Run("the built-in schemes parse as with Parse", func(t *testing.T) {
		for _, raw := range []string{"postgres://u@h/db", "sqlite::memory:", "sqlite:///tmp/x.db"} {
			want, wantErr := Parse(raw)
			got, err := ParseAlso(raw, registered)
			require.Equal(t, wantErr, err, "ParseAlso(%q)", raw)
			require.Equal(t, want, got, "ParseAlso(%q)", raw)
		}
	})

	t.Run("refusals name the registered forms after the built-in ones", func(t *testing.T) {
		for _, raw := range []string{"", "/tmp/rheo.db", "mysql://db/app"} {
			_, err := ParseAlso(raw, registered)
			require.Error(t, err, "ParseAlso(%q)", raw)
			require.Contains(t, err.Error(), Forms+", redis://…, rediss://…", "ParseAlso(%q)", raw)
		}
	})

	t.Run("Parse knows no registered scheme", func(t *testing.T) {
		_, err := Parse("redis://127.0.0.1:6379/0")
		require.ErrorContains(t, err, `unsupported database URL scheme "redis"`)
	})
}
