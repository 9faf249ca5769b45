package sqlite

import (
	"context"

	"github.com/rheo-go/rheo/driver/driverutil"
)

// ops implements driver.Ops for a Driver and for its transactions: each
// method checks what needs no database, then runs the operation's
// statements through run, in a transaction of its own or in a savepoint
// of the host's.
type ops struct {
	run func(ctx context.Context, op string, fn func(s *session) error) error
}

// runChecked is run for operations with text arguments: texts that
// PostgreSQL cannot receive (checkText) fail invalid_argument first, as
// they do there, whatever else is wrong.
func (o ops) runChecked(ctx context.Context, op string, texts []string, fn func(s *session) error) error {
	for _, text := range texts {
		if err := driverutil.CheckText("text argument", text); err != nil {
			return err
		}
	}
	return o.run(ctx, op, fn)
}

// runClocked is runChecked for the operations that read the clock (those
// with a clock argument on PostgreSQL): a clock outside the valid range
// fails invalid_argument before anything else is read.
func (o ops) runClocked(ctx context.Context, op string, texts []string, fn func(s *session) error) error {
	return o.runChecked(ctx, op, texts, func(s *session) error {
		if err := s.checkClock(); err != nil {
			return err
		}
		return fn(s)
	})
}
