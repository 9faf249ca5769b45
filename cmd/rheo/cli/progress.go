package cli

import (
	"fmt"
	"io"
	"os"
	"time"
)

// progressInterval is the least time between two progress updates.
const progressInterval = 100 * time.Millisecond

// progress shows how far a long operation got, on one line of stderr that
// it rewrites, when stderr is a terminal; otherwise it prints nothing.
type progress struct {
	w    io.Writer // nil when stderr is not a terminal
	last time.Time
}

func (c *call) newProgress() *progress {
	if !isTerminal(c.stderr) {
		return &progress{}
	}
	return &progress{w: c.stderr}
}

// isTerminal reports whether f is a character device, such as a terminal
// (or /dev/null, where the progress is harmlessly lost).
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	info, err := file.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// show replaces the progress line, at most every progressInterval.
func (p *progress) show(format string, args ...any) {
	if p.w == nil || time.Since(p.last) < progressInterval {
		return
	}
	p.last = time.Now()
	// \r returns to the start of the line and \x1b[K clears it.
	fmt.Fprintf(p.w, "\r\x1b[K"+format, args...)
}

// done clears the progress line, if one is shown.
func (p *progress) done() {
	if p.w != nil && !p.last.IsZero() {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.last = time.Time{}
	}
}
