//go:build !linux

package testpgbouncer

import "os/exec"

// dieWithParent does nothing where the kernel cannot tie a child's life
// to its parent's; the test's cleanup stops the pooler.
func dieWithParent(*exec.Cmd) {}
