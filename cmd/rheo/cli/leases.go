package cli

import (
	"flag"
	"io"

	"github.com/rheo-go/rheo/driver"
)

func leasesCommand() *command {
	return &command{
		name:     "leases",
		synopsis: "STREAM GROUP [--limit N]",
		summary:  "list a group's deliveries in progress, the soonest due first: leases about to lapse, retries about to come due",
		args:     []string{"STREAM", "GROUP"},
		details: `STATE is leased or pending (waiting for a retry's delay, an expired lease nobody
claimed again, or an event reopened by replay). EXPIRES_AT is when a lease lapses
or a pending delivery becomes claimable.`,
		define: func(fs *flag.FlagSet) func(c *call) error {
			limit := intFlagOf(fs, "limit", 100, "show at most `N` deliveries")
			return func(c *call) error {
				c.stream, c.group = c.args[0], c.args[1]
				if *limit < 1 {
					return usagef("--limit must be at least 1, got %d", *limit)
				}
				return c.withDriver(func(drv driver.Driver) error {
					leases, err := drv.Leases(c.ctx, c.stream, c.group, *limit)
					if err != nil {
						return err
					}
					return c.emit(nonNil(leases), func(w io.Writer) error {
						t := newTable("EVENT_ID", "PARTITION", "SEQUENCE", "STATE", "CONSUMER", "ATTEMPT", "EXPIRES_AT", "REASON")
						for _, l := range leases {
							t.add(l.EventID, l.Partition, l.Sequence, l.State, l.ConsumerID, l.Attempt, l.ExpiresAt, l.Reason)
						}
						return t.write(w)
					})
				})
			}
		},
	}
}
