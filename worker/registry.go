package worker

import (
	"reflect"
	"sync"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// registry refuses a second worker or consumer for one (stream, group) on
// one driver in this process: two would compete for the same leases
// through the same connections for no gain, which is almost always a
// mistake of wiring.
var registry = struct {
	sync.Mutex
	running map[registryKey]bool
}{running: map[registryKey]bool{}}

type registryKey struct {
	drv    driver.Driver
	stream string
	group  string
}

// register claims (drv, stream, group) and returns the function that
// releases it.
func register(drv driver.Driver, stream, group string) (func(), error) {
	if !reflect.TypeOf(drv).Comparable() {
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "driver type %T cannot identify a driver (not comparable)", drv)
	}
	key := registryKey{drv: drv, stream: stream, group: group}
	registry.Lock()
	defer registry.Unlock()
	if registry.running[key] {
		return nil, rheo.Errorf(rheo.ErrAlreadyExists,
			"a worker or consumer for stream %q group %q is already running on this driver", stream, group)
	}
	registry.running[key] = true
	return func() {
		registry.Lock()
		defer registry.Unlock()
		delete(registry.running, key)
	}, nil
}
