//go:build unix

package testbackend

import (
	"errors"
	"syscall"
)

// alive reports whether the process pid exists on this host.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
