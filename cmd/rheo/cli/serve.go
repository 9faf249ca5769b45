package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/metrics"
)

// The defaults of rheo serve.
const (
	defaultListen = "127.0.0.1:9464"
	// healthTimeout bounds the database check of /healthz.
	healthTimeout = 2 * time.Second
	// shutdownTimeout is how long requests in progress get to finish once
	// the command is interrupted.
	shutdownTimeout = 10 * time.Second
)

func serveCommand() *command {
	return &command{
		name:     "serve",
		summary:  "serve Prometheus metrics of the database's streams and groups, and a health check",
		noOutput: true,
		details: `Endpoints:
  /metrics   the state of every stream and group, read from the database at each
             scrape (docs/observability.md lists the metrics)
  /healthz   200 when the database answers, 503 when it does not

It listens on 127.0.0.1 unless --listen says otherwise, and stops on SIGINT or
SIGTERM once the requests in progress have finished. The database role needs
rheo_reader.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			listen := fs.String("listen", defaultListen, "`address` to listen on, host:port")
			return func(c *call) error {
				return c.withDriver(func(drv driver.Driver) error {
					return c.serve(drv, *listen)
				})
			}
		},
	}
}

// serve listens on addr until c.ctx ends, then shuts down gracefully.
func (c *call) serve(drv driver.Driver, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return failf("cannot listen on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: serveMux(drv), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(c.stdout, "listening on http://%s (metrics at /metrics, health at /healthz)\n", ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return failf("serve on %s: %v", ln.Addr(), err)
	case <-c.ctx.Done():
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return failf("shut down: %v", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return failf("serve on %s: %v", ln.Addr(), err)
	}
	return nil
}

// serveMux routes the endpoints of rheo serve.
func serveMux(drv driver.Driver) *http.ServeMux {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(drv, nil), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := drv.Ping(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "unavailable: the database does not answer")
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
