package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Systems compared.
const (
	systemRheo  = "rheo"
	systemRiver = "river"
)

// figure is one measured quantity, with one sample per round and system
// (per call for the ops workload).
type figure struct {
	name  string
	unit  string
	rheo  []float64
	river []float64
	redis []float64
}

// results keeps the figures in the order they were first measured.
type results struct {
	figures []*figure
	byName  map[string]*figure
}

func newResults() *results { return &results{byName: map[string]*figure{}} }

// add records one round's value of a figure for a system.
func (r *results) add(system, name, unit string, v float64) {
	f := r.byName[name]
	if f == nil {
		f = &figure{name: name, unit: unit}
		r.byName[name] = f
		r.figures = append(r.figures, f)
	}
	switch system {
	case systemRheo:
		f.rheo = append(f.rheo, v)
	case systemRiver:
		f.river = append(f.river, v)
	case systemRedis:
		f.redis = append(f.redis, v)
	}
}

// median of xs; NaN when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile of sorted durations by the nearest-rank method.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// format renders v with a precision that suits its size.
func format(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "-"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a > 0 && a < 0.1:
		// Two significant digits, not 0.01 for 0.0149: fetch calls per
		// event, for one.
		return fmt.Sprintf("%.2g", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// spread is "median [min – max]", or "-" without samples.
func spread(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s [%s – %s]", format(median(xs)), format(slices.Min(xs)), format(slices.Max(xs)))
}

// ratio of the medians, Rheo over River; NaN when either is missing.
func (f *figure) ratio() float64 {
	if len(f.rheo) == 0 || len(f.river) == 0 {
		return math.NaN()
	}
	return median(f.rheo) / median(f.river)
}

// redisRatio of the medians, Rheo on Redis over Rheo on PostgreSQL; NaN
// when either is missing.
func (f *figure) redisRatio() float64 {
	if len(f.redis) == 0 || len(f.rheo) == 0 {
		return math.NaN()
	}
	return median(f.redis) / median(f.rheo)
}

// hasRedis reports whether any figure has a sample of Rheo on Redis.
func (r *results) hasRedis() bool {
	for _, f := range r.figures {
		if len(f.redis) > 0 {
			return true
		}
	}
	return false
}

// writeTable prints every figure: median and range per system and the
// ratio of the medians; with Rheo on Redis, its column and the ratio
// Redis/PostgreSQL follow.
func (r *results) writeTable(w io.Writer) {
	nameWidth := len("figure")
	for _, f := range r.figures {
		nameWidth = max(nameWidth, len(f.name)+len(f.unit)+3)
	}
	if !r.hasRedis() {
		fmt.Fprintf(w, "%-*s  %-32s  %-32s  %s\n", nameWidth, "figure", "rheo median [min – max]", "river median [min – max]", "rheo/river")
		fmt.Fprintln(w, strings.Repeat("-", nameWidth+32+32+16))
		for _, f := range r.figures {
			fmt.Fprintf(w, "%-*s  %-32s  %-32s  %s\n", nameWidth, f.name+" ("+f.unit+")",
				spread(f.rheo), spread(f.river), format(f.ratio()))
		}
		return
	}
	fmt.Fprintf(w, "%-*s  %-32s  %-32s  %-32s  %-10s  %s\n", nameWidth, "figure", "rheo median [min – max]", "river median [min – max]",
		"rheo on redis median [min – max]", "rheo/river", "redis/postgres")
	fmt.Fprintln(w, strings.Repeat("-", nameWidth+32+32+32+10+24))
	for _, f := range r.figures {
		fmt.Fprintf(w, "%-*s  %-32s  %-32s  %-32s  %-10s  %s\n", nameWidth, f.name+" ("+f.unit+")",
			spread(f.rheo), spread(f.river), spread(f.redis), format(f.ratio()), format(f.redisRatio()))
	}
}

// writeSummary prints the closing lines, one per figure: the ratio where
// both Rheo on PostgreSQL and River were measured, else the single
// system's median; then, for the figures of Rheo on Redis, its median
// and the ratio Redis/PostgreSQL where Rheo on PostgreSQL was measured.
func (r *results) writeSummary(w io.Writer) {
	for _, f := range r.figures {
		switch {
		case len(f.rheo) > 0 && len(f.river) > 0:
			fmt.Fprintf(w, "ratio rheo/river %s: %.2f\n", f.name, f.ratio())
		case len(f.rheo) > 0:
			fmt.Fprintf(w, "rheo %s: %s %s\n", f.name, format(median(f.rheo)), f.unit)
		case len(f.river) > 0:
			fmt.Fprintf(w, "river %s: %s %s\n", f.name, format(median(f.river)), f.unit)
		}
	}
	for _, f := range r.figures {
		if len(f.redis) == 0 {
			continue
		}
		fmt.Fprintf(w, "rheo on redis %s: %s %s\n", f.name, format(median(f.redis)), f.unit)
		if len(f.rheo) > 0 {
			fmt.Fprintf(w, "ratio rheo redis/postgres %s: %.2f\n", f.name, f.redisRatio())
		}
	}
	// The citus workload's figures, on the cluster over the single server.
	for _, f := range r.figures {
		rest, ok := strings.CutPrefix(f.name, "citus ")
		if single := r.byName["single "+rest]; ok && single != nil && len(f.rheo) > 0 && len(single.rheo) > 0 {
			fmt.Fprintf(w, "ratio rheo citus/single %s: %.2f\n", rest, median(f.rheo)/median(single.rheo))
		}
	}
}

// textReport keeps the sections printed after the table of figures, each
// under its title: the relation sizes of the last cost round of each
// system, the table counters of the ops workload.
type textReport struct {
	titles []string
	texts  map[string]string
}

// add records text under title, replacing the one an earlier round
// recorded under the same title.
func (r *textReport) add(title, text string) {
	if r.texts == nil {
		r.texts = map[string]string{}
	}
	if _, ok := r.texts[title]; !ok {
		r.titles = append(r.titles, title)
	}
	r.texts[title] = text
}

func (r *textReport) write(w io.Writer) {
	for _, t := range r.titles {
		fmt.Fprintf(w, "%s\n%s\n", t, r.texts[t])
	}
}
