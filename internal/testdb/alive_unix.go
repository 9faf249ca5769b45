//go:build unix

package testdb

import (
	"errors"
	"syscall"
)

// Alive reports whether the process pid exists on this host.
func Alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
