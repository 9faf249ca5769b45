package testpgbouncer

import (
	"os/exec"
	"syscall"
)

// dieWithParent stops the pooler should the test binary die without
// running its cleanups.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
