package cli

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeLimits checks the limits of rheo serve's server: every
// timeout set, and requests beyond the cap answered 503 at once.
func TestServeLimits(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	})
	srv := newServer(slow, 1)
	for _, limit := range []int64{int64(srv.ReadHeaderTimeout), int64(srv.ReadTimeout), int64(srv.WriteTimeout), int64(srv.IdleTimeout), int64(srv.MaxHeaderBytes)} {
		require.Positive(t, limit, "server %+v: want every timeout and the header limit set", srv)
	}
	done := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		done <- rec.Code
	}()
	<-entered
	rec := httptest.NewRecorder()
	srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "a request beyond the cap: %v, want 503 with Retry-After", rec.Header())
	require.NotEmpty(t, rec.Header().Get("Retry-After"), "a request beyond the cap: %d %v, want 503 with Retry-After", rec.Code, rec.Header())
	close(release)
	require.Equal(t, http.StatusOK, <-done, "the request within the cap")
	// The slot is free again.
	go func() { <-entered }()
	rec = httptest.NewRecorder()
	srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusOK, rec.Code, "a request after the first ended")
}
