package metrics_test

import (
	"context"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rheo-go/rheo/connect"
	"github.com/rheo-go/rheo/metrics"
)

// Serve Rheo's lag, in-flight and dead-letter figures to Prometheus, on
// a registry of the program's own. One collector per database is
// enough, whatever the number of workers: it reads the database's
// state, not a process's.
func ExampleNewCollector() {
	ctx := context.Background()
	drv, err := connect.Open(ctx, os.Getenv("DATABASE_URL"), nil)
	if err != nil {
		panic(err)
	}
	defer drv.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(drv, nil))
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if err := http.ListenAndServe(":9090", nil); err != nil {
		panic(err)
	}
}
