package redistest

import "syscall"

// procAttr makes a server die with the test process that started it,
// also when that process never reaches Stop (a panic, a kill, a test
// binary whose TestMain does not call Main).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
