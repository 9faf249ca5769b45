package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
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

// isTerminal reports whether f is a terminal. It asks the terminal
// driver (an ioctl, through golang.org/x/term), since the file mode alone
// cannot tell: /dev/null and other devices are character devices too, and
// rheo append < /dev/null must not wait for a Ctrl-D.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
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
