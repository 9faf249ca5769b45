//go:build !linux

package testcitus

import (
	"errors"
	"os"
	"syscall"
)

// account is the user the servers run as; off Linux, always the tests'
// own (nil).
type account struct{}

// serverAccount is nil: off Linux this package does not switch users,
// and refuses to run the servers as root, which PostgreSQL refuses too.
func serverAccount() (*account, error) {
	if os.Geteuid() == 0 {
		return nil, errors.New("the tests run as root, and PostgreSQL refuses to: off Linux the Citus test cluster does not switch users; run the tests as another user")
	}
	return nil, nil
}

// chown leaves path as it is: the servers run as the tests' user.
func (*account) chown(string) error { return nil }

// sysProcAttr is nothing: the servers run as the tests' user, and the
// kernel cannot tie their lives to the test binary's; testskip.Run stops
// them.
func sysProcAttr(*account, bool) *syscall.SysProcAttr { return nil }
