package cli

import (
	"net/http"
	"net/http/httptest"
	"testing"
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
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Fatalf("server %+v: want every timeout and the header limit set", srv)
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
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a request beyond the cap: %d %v, want 503 with Retry-After", rec.Code, rec.Header())
	}
	close(release)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("the request within the cap: %d", code)
	}
	// The slot is free again.
	go func() { <-entered }()
	rec = httptest.NewRecorder()
	srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("a request after the first ended: %d", rec.Code)
	}
}
