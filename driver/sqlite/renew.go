package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver/driverutil"
)

// renew extends a held lease to clock + leaseMS.
func (s *session) renew(ctx context.Context, id string, leaseMS int64) (time.Time, error) {
	if leaseMS < 1 {
		return time.Time{}, rheo.Errorf(rheo.ErrInvalidArgument, "lease_ms must be >= 1, got %d", leaseMS)
	}
	var expires int64
	err := s.queryRow(ctx, `
		UPDATE rheo_deliveries SET expires_at = ?1
		 WHERE lease_id = ?2 AND state = 'leased'
		RETURNING expires_at`, s.now+leaseMS*1000, id).Scan(&expires)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, staleLease(id)
	}
	return fromMicros(expires), err
}

// Renew extends a held lease to clock+d and returns the new expiry. d
// below one millisecond is invalid_argument. A lease id that is not a
// UUID was never issued: stale_lease.
func (o ops) Renew(ctx context.Context, leaseID string, d time.Duration) (time.Time, error) {
	id, err := driverutil.ParseLeaseID(leaseID)
	if err != nil {
		return time.Time{}, err
	}
	leaseMS, err := driverutil.Millis("lease duration", d)
	if err != nil {
		return time.Time{}, err
	}
	var expiresAt time.Time
	err = o.runClocked(ctx, "renew", nil, func(s *session) error {
		var err error
		expiresAt, err = s.renew(ctx, id, int64(leaseMS))
		return err
	})
	return expiresAt, err
}
