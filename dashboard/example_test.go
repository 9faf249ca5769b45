package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/rheo-go/rheo/dashboard"
	"github.com/rheo-go/rheo/driver/sqlite"
)

// A host mounts the dashboard in its own server under a prefix.
func ExampleNew() {
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, ":memory:", &sqlite.Options{Migrate: true})
	if err != nil {
		panic(err)
	}
	defer drv.Close()
	if err := drv.CreateStream(ctx, "orders", 4); err != nil {
		panic(err)
	}

	h, err := dashboard.New(ctx, drv, &dashboard.Options{Prefix: "/admin/rheo"})
	if err != nil {
		panic(err)
	}
	defer h.Close() // stops the sampling goroutine

	mux := http.NewServeMux()
	mux.Handle("/admin/rheo/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/admin/rheo/")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status)
	fmt.Println(strings.Contains(string(body), `<a href="/admin/rheo/streams/orders">orders</a>`))
	fmt.Println(resp.Header.Get("Content-Security-Policy") != "")
	// Output:
	// 200 OK
	// true
	// true
}
