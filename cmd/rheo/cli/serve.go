package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rheo-go/rheo/dashboard"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/metrics"
)

// The variables that set the dashboard's credentials. Either, when set,
// is required of every request to the dashboard (not of /metrics and
// /healthz).
const (
	EnvDashboardToken     = "RHEO_DASHBOARD_TOKEN"
	EnvDashboardBasicAuth = "RHEO_DASHBOARD_BASIC_AUTH"
)

// The defaults of rheo serve.
const (
	defaultListen = "127.0.0.1:9464"
	// healthTimeout bounds the database check of /healthz.
	healthTimeout = 2 * time.Second
	// shutdownTimeout is how long requests in progress get to finish once
	// the command is interrupted.
	shutdownTimeout = 10 * time.Second
	// defaultMaxRequests is how many requests are served at once by
	// default; the others are answered 503 at once.
	defaultMaxRequests = 32
)

// The limits of rheo serve's HTTP server: a client that sends its request
// slowly, or reads the answer slowly, holds a connection no longer than
// these; the database calls of a request are bounded by the dashboard's
// and the collector's own timeouts (10 s), well within them.
const (
	serveReadHeaderTimeout = 10 * time.Second
	serveReadTimeout       = 30 * time.Second
	serveWriteTimeout      = 60 * time.Second
	serveIdleTimeout       = 2 * time.Minute
	serveMaxHeaderBytes    = 64 << 10
)

func serveCommand() *command {
	return &command{
		name:     "serve",
		synopsis: "[--listen ADDR] [--allow-actions] [--no-dashboard] [--sample-interval D] [--metrics-cache D] [--max-requests N]",
		summary:  "serve the web dashboard, Prometheus metrics of the streams and groups, and a health check",
		noOutput: true,
		details: `Endpoints:
  /          the dashboard: streams, groups, dead letters, history search and
             lineage, live (docs/ops.md#the-dashboard)
  /metrics   the state of every stream and group, read from the database at most
             once per --metrics-cache, however many scrape it (docs/observability.md
             lists the metrics)
  /healthz   200 when the database answers, 503 when it does not

The dashboard is read-only unless --allow-actions: then it also reopens dead
letters, replays groups (after a dry-run count) and resets them (after a
confirmation), each a POST with a CSRF token, logged on stderr. When
` + EnvDashboardToken + ` is set, every dashboard request needs that token (as a
bearer token, or typed in once on its sign-in page); when
` + EnvDashboardBasicAuth + `=user:password is set, HTTP basic authentication with
them. /metrics and /healthz need neither.

It listens on 127.0.0.1 unless --listen says otherwise, and stops on SIGINT or
SIGTERM once the requests in progress have finished. It serves at most
--max-requests requests at once, answering the others 503 at once, and gives a
client 10 s to send a request's headers, 30 s the whole request and 60 s to read
the answer. The database role needs
rheo_reader, and rheo_admin for the dashboard's actions.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			listen := fs.String("listen", defaultListen, "`address` to listen on, host:port")
			allowActions := fs.Bool("allow-actions", false, "let the dashboard reopen dead letters, replay and reset groups")
			noDashboard := fs.Bool("no-dashboard", false, "serve only /metrics and /healthz")
			sampleInterval := fs.Duration("sample-interval", dashboard.DefaultSampleInterval,
				"how often the dashboard samples watermarks and lags for its rates and charts, such as `5s`")
			metricsCache := fs.Duration("metrics-cache", metrics.DefaultCacheFor,
				"how long a scrape of /metrics answers the scrapes that follow it, such as `5s`; 0 reads the database at every scrape")
			maxRequests := fs.Int("max-requests", defaultMaxRequests, "serve at most `N` requests at once; the others are answered 503")
			return func(c *call) error {
				if *sampleInterval <= 0 {
					return usagef("--sample-interval must be positive, got %s", *sampleInterval)
				}
				if *metricsCache < 0 {
					return usagef("--metrics-cache must not be negative, got %s", *metricsCache)
				}
				if *maxRequests < 1 {
					return usagef("--max-requests must be at least 1, got %d", *maxRequests)
				}
				limits := serveLimits{metricsCache: *metricsCache, maxRequests: *maxRequests}
				var dash *dashboard.Options
				if !*noDashboard {
					dash = &dashboard.Options{
						AllowActions:   *allowActions,
						Token:          os.Getenv(EnvDashboardToken),
						BasicAuth:      os.Getenv(EnvDashboardBasicAuth),
						SampleInterval: *sampleInterval,
						SampleWindow:   max(dashboard.DefaultSampleWindow, *sampleInterval),
						Logger:         slog.New(slog.NewTextHandler(c.stderr, nil)),
					}
					if dash.Token == "" && dash.BasicAuth == "" && !isLoopback(*listen) {
						fmt.Fprintf(c.stderr, "rheo serve: warning: the dashboard on %s is open to anyone who can reach it; set %s or %s\n",
							*listen, EnvDashboardToken, EnvDashboardBasicAuth)
						if *allowActions {
							return failf("--allow-actions on %s, an address other machines may reach, needs %s or %s set; nothing was started",
								*listen, EnvDashboardToken, EnvDashboardBasicAuth)
						}
					}
				} else if *allowActions {
					return usagef("--allow-actions needs the dashboard: drop --no-dashboard")
				}
				return c.withDriver(func(drv driver.Driver) error {
					return c.serve(drv, *listen, dash, limits)
				})
			}
		},
	}
}

// isLoopback reports whether a listen address can only be reached from
// this machine.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serveLimits are the flags of rheo serve that bound its load.
type serveLimits struct {
	// metricsCache is --metrics-cache: 0 reads the database at every
	// scrape.
	metricsCache time.Duration
	// maxRequests is --max-requests.
	maxRequests int
}

// serve listens on addr until c.ctx ends, then shuts down gracefully.
// dash nil serves no dashboard.
func (c *call) serve(drv driver.Driver, addr string, dash *dashboard.Options, limits serveLimits) error {
	var dashHandler *dashboard.Handler
	if dash != nil {
		var err error
		if dashHandler, err = dashboard.New(c.ctx, drv, dash); err != nil {
			return failf("%v (check %s and %s)", err, EnvDashboardToken, EnvDashboardBasicAuth)
		}
		defer dashHandler.Close()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return failf("cannot listen on %s: %v", addr, err)
	}
	mux := serveMux(drv, limits.metricsCache)
	what := "metrics at /metrics, health at /healthz"
	if dashHandler != nil {
		mux.Handle("/", dashHandler)
		what = "dashboard at /, " + what
		if dash.AllowActions {
			what += "; dashboard actions allowed"
		}
	}
	srv := newServer(mux, limits.maxRequests)
	fmt.Fprintf(c.stdout, "listening on http://%s (%s)\n", ln.Addr(), what)
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

// newServer returns the HTTP server of rheo serve, with its limits: at
// most maxRequests requests served at once.
func newServer(h http.Handler, maxRequests int) *http.Server {
	return &http.Server{
		Handler:           limitRequests(h, maxRequests),
		ReadHeaderTimeout: serveReadHeaderTimeout,
		ReadTimeout:       serveReadTimeout,
		WriteTimeout:      serveWriteTimeout,
		IdleTimeout:       serveIdleTimeout,
		MaxHeaderBytes:    serveMaxHeaderBytes,
	}
}

// limitRequests serves at most n requests at once and answers the others
// 503 at once, with Retry-After: a burst of requests (or of scrapes) can
// neither queue up without bound nor multiply the load on the database.
func limitRequests(h http.Handler, n int) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			h.ServeHTTP(w, r)
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy: too many requests at once; try again in a moment", http.StatusServiceUnavailable)
		}
	})
}

// serveMux routes the endpoints of rheo serve; a scrape of /metrics
// answers those of the next metricsCache (0: none).
func serveMux(drv driver.Driver, metricsCache time.Duration) *http.ServeMux {
	if metricsCache == 0 {
		metricsCache = -1 // the collector's word for no cache
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(drv, &metrics.Options{CacheFor: metricsCache}), collectors.NewGoCollector(),
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
