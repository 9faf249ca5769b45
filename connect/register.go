package connect

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/internal/dburl"
)

// Opener opens a driver for a database URL of one of the schemes it was
// registered for. It honours opts.Clock (every time decision of the
// driver reads it), opts.Logger, and opts.Migrate (doing whatever set-up
// the database needs, or nothing, before it returns; without Migrate it
// changes nothing). opts is never nil. Errors follow Open's: a *URLError
// for a URL it cannot use, an error wrapping rheo.ErrBackendUnavailable
// when the database cannot be reached.
type Opener func(ctx context.Context, url string, opts *Options) (driver.Driver, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Opener{}
)

// Register makes Open accept URLs of the given schemes ("redis",
// "rediss", …, compared without regard to case) and open them with open,
// as database/sql learns drivers: a driver package registers itself in
// its init function, so that a program importing it (a blank import is
// enough) can open its URLs. Register panics, registering none of the
// schemes, when open is nil, when no scheme is given, or when a scheme is
// empty, is registered twice or is one Open knows itself (postgres,
// postgresql, sqlite: those stay Open's own, so that a program that
// links another driver opens them exactly as before).
func Register(open Opener, schemes ...string) {
	if open == nil {
		panic("connect: Register of a nil Opener")
	}
	if len(schemes) == 0 {
		panic("connect: Register without a scheme")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	// Every scheme is checked before any is registered, so a refused
	// call registers nothing.
	lower := make([]string, len(schemes))
	for i, scheme := range schemes {
		s := strings.ToLower(scheme)
		if s == "" {
			panic("connect: Register of an empty scheme")
		}
		if s == "postgres" || s == "postgresql" || s == "sqlite" {
			panic(fmt.Sprintf("connect: Register of the scheme %q, which Open knows itself", scheme))
		}
		if _, dup := registry[s]; dup || slices.Contains(lower[:i], s) {
			panic(fmt.Sprintf("connect: Register called twice for the scheme %q", scheme))
		}
		lower[i] = s
	}
	for _, s := range lower {
		registry[s] = open
	}
}

// Schemes lists the schemes registered with Register, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	schemes := make([]string, 0, len(registry))
	for s := range registry {
		schemes = append(schemes, s)
	}
	sort.Strings(schemes)
	return schemes
}

// Forms lists every URL form Open accepts, for usage texts: PostgreSQL's
// and SQLite's, then scheme://… for each registered scheme.
func Forms() string {
	return dburl.FormsAlso(Schemes())
}

// registered returns the Opener registered for url's scheme, or nil.
func registered(url string) Opener {
	scheme, _, ok := strings.Cut(url, ":")
	if !ok {
		return nil
	}
	registryMu.RLock()
	defer registryMu.RUnlock()
	return registry[strings.ToLower(scheme)]
}
