package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// DefaultVacuumEvery is the default of VacuumerConfig.Every.
const DefaultVacuumEvery = 20_000

// ErrVacuumRefused is what a Vacuumer's vacuum function returns when the
// database role may not vacuum the table: the Vacuumer says so once, at
// Info, and stops, leaving the table to autovacuum.
var ErrVacuumRefused = errors.New("this role may not vacuum the table")

// VacuumerConfig are the settings of NewVacuumer. A nil *VacuumerConfig
// means the defaults.
type VacuumerConfig struct {
	// Every is how many settles start a vacuum. Defaults to
	// DefaultVacuumEvery; a negative value never vacuums (NewVacuumer
	// returns nil).
	Every int
	// Table names the table vacuumed, for the log. Defaults to
	// "rheo.deliveries".
	Table string
	// Option names the setting that changes Every, for the log's advice.
	// Defaults to "the driver's VacuumEvery option".
	Option string
	// Logger receives the refusal (Info, once) and failed vacuums (Warn).
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// Vacuumer keeps a table of settles small between autovacuum's visits.
// Every settle leaves a dead row in the deliveries table (an ack deletes
// its row, a retry or reject rewrites or deletes it), and the database
// reuses that space, in the table and in its indexes, only after a
// VACUUM. Autovacuum visits a database at most once per
// autovacuum_naptime (a minute by default), which at tens of thousands
// of settles a second lets the table and its lease_id index grow by
// hundreds of megabytes. So after every Every settles the Vacuumer runs
// the vacuum in the background, one at a time; at that rate each run has
// little to do.
//
// A role that may not vacuum the table (its vacuum function returns
// ErrVacuumRefused) is found out by the first run, which says so once;
// the Vacuumer then stops. driver/postgres runs one for rheo.deliveries
// (its Options.VacuumEvery); a nil *Vacuumer does nothing.
type Vacuumer struct {
	vacuum func(ctx context.Context) error
	cfg    VacuumerConfig
	every  int64

	settled atomic.Int64 // settles since the last run began
	running atomic.Bool
	refused atomic.Bool // the role may not vacuum the table

	mu     sync.Mutex // guards closed and runs.Add against Close
	closed bool
	runs   sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// NewVacuumer returns a Vacuumer that calls vacuum after every cfg.Every
// settles, or nil when cfg.Every is negative. cfg may be nil.
func NewVacuumer(vacuum func(ctx context.Context) error, cfg *VacuumerConfig) *Vacuumer {
	c := VacuumerConfig{}
	if cfg != nil {
		c = *cfg
	}
	if c.Every < 0 {
		return nil
	}
	if c.Every == 0 {
		c.Every = DefaultVacuumEvery
	}
	if c.Table == "" {
		c.Table = "rheo.deliveries"
	}
	if c.Option == "" {
		c.Option = "the driver's VacuumEvery option"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Vacuumer{vacuum: vacuum, cfg: c, every: int64(c.Every), ctx: ctx, cancel: cancel}
}

// Settled counts n settles and starts a vacuum when enough have gathered
// and none is running.
func (v *Vacuumer) Settled(n int) {
	if v == nil || n <= 0 || v.refused.Load() || v.settled.Add(int64(n)) < v.every {
		return
	}
	if !v.running.CompareAndSwap(false, true) {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		v.running.Store(false)
		return
	}
	v.settled.Store(0)
	v.runs.Add(1)
	go v.run()
}

func (v *Vacuumer) run() {
	defer v.runs.Done()
	defer v.running.Store(false)
	err := v.vacuum(v.ctx)
	switch {
	case errors.Is(err, ErrVacuumRefused):
		v.refused.Store(true)
		v.cfg.Logger.InfoContext(v.ctx, fmt.Sprintf("rheo: this role may not VACUUM %s, which is left to autovacuum; see %s",
			v.cfg.Table, v.cfg.Option))
	case err != nil && !errors.Is(err, context.Canceled):
		v.cfg.Logger.WarnContext(v.ctx, "rheo: vacuum of "+v.cfg.Table+" failed", "error", err)
	}
}

// Close cancels a vacuum in progress and waits for it; later settles
// start none.
func (v *Vacuumer) Close() {
	if v == nil {
		return
	}
	v.mu.Lock()
	v.closed = true
	v.mu.Unlock()
	v.cancel()
	v.runs.Wait()
}
