package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
)

// workloadThroughput names the workloads whose figures issue 24's closing
// lines need, Rheo only: append (with the raw insert ceiling; batches of
// 1000 unless --batches says otherwise), slow, competing, processes, cost
// and horizon.
const workloadThroughput = "throughput"

// throughputWorkloads are what --workloads throughput runs.
var throughputWorkloads = []string{"append", "slow", "competing", workloadProcesses, "cost", workloadHorizon}

// expandThroughput replaces throughput in c.workloads by the workloads it
// names (each once, in the order of the list), and, for the flags not
// given (set), runs Rheo only and appends in batches of 1000.
func (c *config) expandThroughput(set map[string]bool, setFlag func(name, value string) error) error {
	i := slices.Index(c.workloads, workloadThroughput)
	if i < 0 {
		return nil
	}
	var ws []string
	for _, w := range slices.Concat(c.workloads[:i], throughputWorkloads, c.workloads[i+1:]) {
		if w != workloadThroughput && !contains(ws, w) {
			ws = append(ws, w)
		}
	}
	c.workloads = ws
	for name, v := range map[string]string{"batches": "1000", "river": "false", "redis": "false"} {
		if !set[name] {
			if err := setFlag(name, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeThroughput prints the lines of issue 24 whose figures were
// measured, from the medians of Rheo's figures.
func (c *config) writeThroughput(w io.Writer, res *results) {
	rheo := func(name string) (float64, bool) {
		f := res.byName[name]
		if f == nil || len(f.rheo) == 0 {
			return 0, false
		}
		return median(f.rheo), true
	}
	ratio := func(line, num, den string) {
		a, ok := rheo(num)
		b, ok2 := rheo(den)
		if ok && ok2 {
			fmt.Fprintf(w, "%s: %.2f\n", line, a/b)
		}
	}
	z := c.workerSizes
	single := singleName(z.competingWorkers * z.competingConcurrency)
	ratio(fmt.Sprintf("ratio rheo competing %dx%d / single c=%d", z.competingWorkers, z.competingConcurrency, z.competingWorkers*z.competingConcurrency),
		z.competingName()+" total", single+" total")
	p := c.processSizes
	ratio(fmt.Sprintf("ratio rheo competing %d processes x%d / single c=%d", p.procs, p.concurrency, p.procs*p.concurrency),
		p.name()+" total", singleName(p.procs*p.concurrency)+" total")
	if v, ok := rheo("cost WAL consume"); ok {
		fmt.Fprintf(w, "rheo WAL per consumed event: %s bytes\n", format(v))
	}
	if v, ok := rheo("horizon fetch call p50, last interval, held"); ok {
		held, _ := rheo("horizon snapshot held")
		fmt.Fprintf(w, "rheo fetch p50 under a held snapshot after %ds: %s ms\n", int(held), format(v))
	}
	for _, b := range c.batches {
		if b > 1 {
			name := "append b=" + strconv.Itoa(b)
			ratio("ratio rheo "+name+" / raw insert", name+" vs InsertMany", name+" raw insert")
		}
	}
	if v, ok := rheo(c.slowName() + " of ideal from handler time"); ok {
		fmt.Fprintf(w, "ratio rheo %s / ideal from handler time: %.2f\n", c.slowName(), v/100)
	}
}
