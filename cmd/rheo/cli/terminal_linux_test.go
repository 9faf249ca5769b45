package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"unsafe"

	"github.com/rheo-go/rheo/cmd/rheo/cli"
	"github.com/stretchr/testify/require"
)

// cliOpenPTY opens a pseudo-terminal and returns its two ends: what is
// written to the controller is read from the terminal.
func cliOpenPTY(t *testing.T) (controller, terminal *os.File) {
	t.Helper()
	controller, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { controller.Close() })
	var unlock int32
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, controller.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock)))
	require.Zero(t, errno, "unlock the pseudo-terminal: %v", errno)
	var n uint32
	_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, controller.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
	require.Zero(t, errno, "number the pseudo-terminal: %v", errno)
	terminal, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err, "open the pseudo-terminal")
	t.Cleanup(func() { terminal.Close() })
	return controller, terminal
}

// TestCLITerminal checks that append says how to end its input when
// stdin is a terminal, and only then (TestCLIAppendFailures reads
// /dev/null, a character device that is no terminal).
func TestCLITerminal(t *testing.T) {
	cliForEachBackend(t, func(t *testing.T, b *cliBackend) {
		b.cliStream(t, "typed", 1, 5)
		controller, terminal := cliOpenPTY(t)
		// A line, then Ctrl-D at the start of the next: the end of input.
		_, err := controller.WriteString("{\"typed\":true}\n\x04")
		require.NoError(t, err)
		var stdout, stderr bytes.Buffer
		code := cli.Run(context.Background(), []string{"append", "typed", "--database-url", b.url}, terminal, &stdout, &stderr)
		msg := fmt.Sprintf("append from a terminal: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
		require.Equal(t, cli.ExitOK, code, msg)
		require.Equal(t, "reading one JSON object per line; end with Ctrl-D\n", stderr.String(), msg)
		require.Contains(t, stdout.String(), "total      1", msg)
	})
}
