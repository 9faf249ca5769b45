package testcitus

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// account is the user the servers run as when the tests run as root
// (initdb and postgres refuse to run as root); nil is the tests' own.
type account struct {
	uid, gid uint32
}

// serverAccount is the account the servers run as: the postgres user
// when the tests run as root, else nil.
func serverAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("the tests run as root, and PostgreSQL refuses to: no postgres user to run it as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("the postgres user's uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("the postgres user's gid %q: %w", u.Gid, err)
	}
	return &account{uid: uint32(uid), gid: uint32(gid)}, nil
}

// chown gives path to a; with a nil, it leaves path as it is.
func (a *account) chown(path string) error {
	if a == nil {
		return nil
	}
	return os.Lchown(path, int(a.uid), int(a.gid))
}

// sysProcAttr runs a process as a, and, with dieWithParent, has the
// kernel stop it (SIGQUIT: PostgreSQL's immediate shutdown) should the
// thread that starts it end: when the test binary dies without running
// its cleanups.
func sysProcAttr(a *account, dieWithParent bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{}
	if a != nil {
		attr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid}
	}
	if dieWithParent {
		attr.Pdeathsig = syscall.SIGQUIT
	}
	return attr
}
