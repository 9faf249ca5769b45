package connect_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/driver"
)

// fakeOpens records the calls of the Opener registered for the fake
// scheme, which opens an in-memory SQLite database in their place.
var fakeOpens struct {
	sync.Mutex
	urls []string
	opts []*connect.Options
}

// openFake is the Opener of the schemes rheofake and rheofakes: it
// records its arguments and opens an in-memory SQLite database with the
// clock and the Migrate it was given.
func openFake(ctx context.Context, url string, opts *connect.Options) (driver.Driver, error) {
	fakeOpens.Lock()
	fakeOpens.urls = append(fakeOpens.urls, url)
	fakeOpens.opts = append(fakeOpens.opts, opts)
	fakeOpens.Unlock()
	if strings.Contains(url, "unreachable") {
		return nil, &rheo.UnavailableError{Op: "open", Err: errors.New("connection refused")}
	}
	return connect.Open(ctx, "sqlite::memory:", &connect.Options{Clock: opts.Clock, Migrate: opts.Migrate})
}

func init() {
	connect.Register(openFake, "rheofake", "RheoFakeS")
}

// lastFakeOpen returns the arguments of the fake Opener's last call.
func lastFakeOpen(t *testing.T) (string, *connect.Options) {
	t.Helper()
	fakeOpens.Lock()
	defer fakeOpens.Unlock()
	require.NotEmpty(t, fakeOpens.urls, "the registered Opener was not called")
	n := len(fakeOpens.urls)
	return fakeOpens.urls[n-1], fakeOpens.opts[n-1]
}

func TestRegisteredScheme(t *testing.T) {
	ctx := context.Background()

	t.Run("Open hands a registered scheme's URL and the Options to its Opener", func(t *testing.T) {
		url := "rheofake://user:secret@127.0.0.1:7000/3?tls=false"
		opts := &connect.Options{Clock: pinnedClock, Migrate: true}
		drv, err := connect.Open(ctx, url, opts)
		require.NoError(t, err, "Open(%q)", url)
		defer drv.Close()
		gotURL, gotOpts := lastFakeOpen(t)
		require.Equal(t, url, gotURL, "the Opener's URL")
		require.Same(t, opts, gotOpts, "the Opener's Options")
		useDriver(t, drv)
	})

	t.Run("schemes compare without regard to case", func(t *testing.T) {
		for _, url := range []string{"RHEOFAKE://host/0", "rheofakes://host/0"} {
			drv, err := connect.Open(ctx, url, &connect.Options{Migrate: true})
			require.NoError(t, err, "Open(%q)", url)
			drv.Close()
			gotURL, _ := lastFakeOpen(t)
			require.Equal(t, url, gotURL, "the Opener's URL")
		}
	})

	t.Run("nil Options reach the Opener as the defaults, never nil", func(t *testing.T) {
		drv, err := connect.Open(ctx, "rheofake://host/0", nil)
		if err == nil {
			drv.Close()
		}
		_, gotOpts := lastFakeOpen(t)
		require.NotNil(t, gotOpts, "the Opener got nil Options")
		require.Equal(t, connect.Options{}, *gotOpts, "the Opener's Options")
		// Without Migrate the in-memory database has no schema: the
		// Opener's own error comes back unchanged.
		var schemaErr *connect.SchemaError
		require.ErrorAs(t, err, &schemaErr, "Open without Migrate")
	})

	t.Run("the Opener's errors come back as it returned them", func(t *testing.T) {
		_, err := connect.Open(ctx, "rheofake://unreachable:1/0", nil)
		require.ErrorIs(t, err, rheo.ErrBackendUnavailable, "Open of an unreachable fake")
	})

	t.Run("Schemes lists the registered schemes in lower case, sorted", func(t *testing.T) {
		require.Equal(t, []string{"rheofake", "rheofakes"}, connect.Schemes())
	})

	t.Run("Forms lists the built-in forms and then the registered schemes", func(t *testing.T) {
		forms := connect.Forms()
		require.True(t, strings.HasPrefix(forms, "postgres://…, postgresql://…, sqlite:"), "Forms() = %q", forms)
		require.True(t, strings.HasSuffix(forms, ", rheofake://…, rheofakes://…"), "Forms() = %q", forms)
	})

	t.Run("postgres and sqlite URLs do not reach the registry", func(t *testing.T) {
		fakeOpens.Lock()
		before := len(fakeOpens.urls)
		fakeOpens.Unlock()
		drv, err := connect.Open(ctx, "sqlite::memory:", &connect.Options{Migrate: true})
		require.NoError(t, err)
		drv.Close()
		fakeOpens.Lock()
		after := len(fakeOpens.urls)
		fakeOpens.Unlock()
		require.Equal(t, before, after, "the fake Opener was called for an SQLite URL")
	})
}

func TestUnknownSchemeListsRegistered(t *testing.T) {
	for _, url := range []string{"mysql://host/db", "redis-cluster://a,b", "no-scheme-here", ""} {
		_, err := connect.Open(context.Background(), url, nil)
		var urlErr *connect.URLError
		require.ErrorAs(t, err, &urlErr, "Open(%q)", url)
		require.ErrorIs(t, err, rheo.ErrInvalidArgument, "Open(%q)", url)
		require.Contains(t, err.Error(), "sqlite::memory:, rheofake://…, rheofakes://…", "Open(%q) = %v", url, err)
	}
}

func TestRegisterPanics(t *testing.T) {
	tests := []struct {
		name    string
		open    connect.Opener
		schemes []string
		want    string
	}{
		{name: "a nil Opener", open: nil, schemes: []string{"rheonil"}, want: "nil Opener"},
		{name: "no scheme", open: openFake, schemes: nil, want: "without a scheme"},
		{name: "an empty scheme", open: openFake, schemes: []string{""}, want: "empty scheme"},
		{name: "a good scheme beside a refused one", open: openFake, schemes: []string{"rheonew", "sqlite"}, want: "Open knows itself"},
		{name: "a scheme twice in one call", open: openFake, schemes: []string{"rheotwice", "RheoTwice"}, want: "twice"},
		{name: "a scheme registered twice", open: openFake, schemes: []string{"rheofake"}, want: `twice for the scheme "rheofake"`},
		{name: "a scheme registered twice in another case", open: openFake, schemes: []string{"RHEOFAKE"}, want: "twice"},
		{name: "the postgres scheme", open: openFake, schemes: []string{"postgres"}, want: "Open knows itself"},
		{name: "the postgresql scheme in capitals", open: openFake, schemes: []string{"POSTGRESQL"}, want: "Open knows itself"},
		{name: "the sqlite scheme", open: openFake, schemes: []string{"sqlite"}, want: "Open knows itself"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := connect.Schemes()
			var got any
			func() {
				defer func() { got = recover() }()
				connect.Register(tt.open, tt.schemes...)
			}()
			require.NotNil(t, got, "Register did not panic")
			require.Contains(t, got, tt.want, "Register's panic")
			require.Equal(t, before, connect.Schemes(), "a refused Register changed the schemes")
		})
	}
}
