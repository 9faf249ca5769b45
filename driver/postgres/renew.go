package postgres

import (
	"context"
	"time"

	"github.com/rheo-go/rheo/driver/driverutil"
)

// Renew extends a held lease to clock+d and returns the new expiry. d is
// passed through: below one millisecond is invalid_argument. A lease id
// that is not a UUID was never issued: stale_lease.
func (o *ops) Renew(ctx context.Context, leaseID string, d time.Duration) (time.Time, error) {
	id, err := leaseIDArg(leaseID)
	if err != nil {
		return time.Time{}, err
	}
	leaseMS, err := driverutil.Millis("lease duration", d)
	if err != nil {
		return time.Time{}, err
	}
	clock, err := o.clockArg()
	if err != nil {
		return time.Time{}, err
	}
	var expiresAt time.Time
	err = o.run(ctx, "renew", true, func(q querier) error {
		return q.QueryRow(ctx, `SELECT rheo.renew(lease_id => $1, lease_ms => $2, clock => $3)`,
			id, leaseMS, clock).Scan(&expiresAt)
	})
	return expiresAt, err
}
