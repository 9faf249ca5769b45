//go:build !linux

package redistest

import "syscall"

// procAttr is nil where the system has no parent-death signal: Stop (or
// Main) ends the servers.
func procAttr() *syscall.SysProcAttr { return nil }
