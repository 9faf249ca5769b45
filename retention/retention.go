// Package retention holds Rheo's maintenance: it prunes streams and
// vacuums the table of settles in the background.
//
// A Pruner
// visits every stream that has a retention (driver.Ops.SetRetention) once
// per Config.Interval and deletes, in bounded batches, the events that
// are older than it and that every group has passed (reference §7.2, prune
// without force). Streams without a retention are never touched.
//
// One Pruner per database is enough; several are harmless (each batch is
// its own transaction, and concurrent prunes of a stream wait for each
// other). Hosts that run only SQL can schedule rheo.prune with pg_cron
// instead: see docs/ops.md.
//
// A Vacuumer vacuums the deliveries table after every so many settles,
// between autovacuum's visits; driver/postgres runs one on its pool
// (postgres.Options.VacuumEvery).
package retention

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
	"github.com/rheo-go/rheo/driver/driverutil"
	"github.com/rheo-go/rheo/internal/softstop"
)

// The defaults of Config.
const (
	// DefaultInterval is the time between two passes.
	DefaultInterval = time.Minute
	// DefaultBatchSize is the most events one Prune call deletes.
	DefaultBatchSize = driverutil.DefaultPruneCount
	// DefaultSoftStopTimeout bounds the soft stop that cancelling
	// Start's context begins.
	DefaultSoftStopTimeout = 20 * time.Second
)

// The attribute keys of the Pruner's log lines.
const (
	LogKeyStream   = "stream"
	LogKeyDeleted  = "deleted"
	LogKeyBatches  = "batches"
	LogKeyDuration = "duration"
	LogKeyError    = "error"
)

// Config configures a Pruner. Zero values take the documented defaults.
type Config struct {
	// Interval is the time from the end of one pass over the streams to
	// the start of the next. Defaults to 1 minute.
	Interval time.Duration
	// BatchSize is the most events one Prune call deletes, and so the
	// size of each transaction. Defaults to 10000.
	BatchSize int
	// Pause is how long the Pruner waits after a full batch before the
	// next batch of the same stream, so that a large backlog of aged
	// events is deleted in spurts that leave the stream's fetches and
	// appends room in between (a batch holds the cursors of the
	// partitions it prunes until it commits). Zero, the default, pauses
	// as long as the batch took: a pass then keeps its database session
	// busy at most half of the time. Negative means no pause. Pauses are
	// real time, not Clock time.
	Pause time.Duration
	// Logger receives one line per stream pruned: at Info when events
	// were deleted, at Debug when none were, and at Error when a pass
	// failed for the stream. Defaults to slog.Default().
	Logger *slog.Logger
	// Hook, when set, is told what each pass did for each stream with a
	// retention.
	Hook Hook
	// SoftStopTimeout bounds the soft stop that cancelling the context
	// given to Start begins: a batch still running that long after the
	// cancel (by Clock) is cancelled, and its transaction rolls back.
	// Negative waits for the batch however long it takes. Defaults to
	// 20s, as the worker's.
	SoftStopTimeout time.Duration
	// Clock times the passes and the soft stop; tests pass a controlled
	// one. It does not decide which events are old enough: that is the
	// driver's clock (the database's now() on PostgreSQL). Defaults to
	// driver.SystemClock.
	Clock driver.Clock
}

// Hook is told what a pass did for one stream. Pruned is called on the
// pass's goroutine and should return quickly.
type Hook interface {
	Pruned(ctx context.Context, info PruneInfo)
}

// PruneInfo is what one pass did for one stream with a retention.
type PruneInfo struct {
	// Stream is the stream pruned.
	Stream string
	// Deleted is how many events the pass deleted.
	Deleted int64
	// Batches is how many Prune calls the pass made.
	Batches int
	// Duration is how long the pass took for this stream.
	Duration time.Duration
	// Err is why the pass stopped early for this stream, if it did: a
	// database error, or the context's when the pass was interrupted.
	// Deleted counts the batches committed before it.
	Err error
}

// Pruner prunes the streams of one database. Create it with New, run it
// with Start and end it with Stop, or call RunOnce from a scheduler of
// your own.
type Pruner struct {
	drv driver.Driver
	cfg Config

	mu      sync.Mutex
	started bool
	stop    chan struct{} // closed by Stop: no batch after the current one
	cancel  context.CancelFunc
	done    chan struct{}
}

// New checks cfg and returns a Pruner for drv; cfg may be nil. Invalid
// settings are rheo.ErrInvalidArgument naming the field. drv must stay
// open until the Pruner has stopped.
func New(drv driver.Driver, cfg *Config) (*Pruner, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.Interval < 0:
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "Config.Interval must not be negative, got %s", c.Interval)
	case c.BatchSize < 0:
		return nil, rheo.Errorf(rheo.ErrInvalidArgument, "Config.BatchSize must not be negative, got %d", c.BatchSize)
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = driver.SystemClock
	}
	if c.SoftStopTimeout == 0 {
		c.SoftStopTimeout = DefaultSoftStopTimeout
	}
	return &Pruner{drv: drv, cfg: c, stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Start runs a pass at once and then one every Config.Interval, in the
// background, until Stop. ctx's values reach the driver's calls.
// Cancelling ctx stops the Pruner as Stop does, in the background: after
// the batch in progress, which is cancelled if it is still running
// Config.SoftStopTimeout later. A Pruner starts only once, and not after
// Stop.
func (p *Pruner) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.stopped() {
		return rheo.Errorf(rheo.ErrInvalidArgument, "the pruner was already started or stopped")
	}
	p.started = true
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	stopWatch := softstop.OnCancel(ctx, p.cfg.Clock, p.cfg.SoftStopTimeout, func(bound context.Context) { _ = p.Stop(bound) })
	go func() {
		defer close(p.done)
		defer cancel()
		defer stopWatch()
		p.loop(runCtx)
	}()
	return nil
}

// Stop ends the Pruner after the batch in progress, if any, and waits
// until it has. If ctx ends first, Stop cancels that batch (its
// transaction rolls back) and returns ctx's error without waiting
// further. Stopping a Pruner that was never started does nothing.
func (p *Pruner) Stop(ctx context.Context) error {
	p.mu.Lock()
	started := p.started
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		p.cancel()
		return ctx.Err()
	}
}

func (p *Pruner) loop(ctx context.Context) {
	for {
		_, _ = p.runOnce(ctx)
		ch, release := p.cfg.Clock.At(p.cfg.Clock.Now().Add(p.cfg.Interval))
		select {
		case <-ch:
			release()
		case <-p.stop:
			release()
			return
		case <-ctx.Done():
			release()
			return
		}
	}
}

// RunOnce makes one pass: for every stream with a retention, in the
// order of ListStreams, it calls Prune with MaxCount Config.BatchSize
// until a call deletes less than that (every partition then reached an
// event it must keep, so a further call would delete nothing), or ctx
// ends, or Stop is called. It returns what it did for each such stream;
// the error joins the streams' errors and that of listing the streams.
// A stream dropped during the pass is left out. RunOnce may be called
// whether or not the Pruner was started; after Stop it does nothing.
func (p *Pruner) RunOnce(ctx context.Context) ([]PruneInfo, error) {
	return p.runOnce(ctx)
}

func (p *Pruner) runOnce(ctx context.Context) ([]PruneInfo, error) {
	streams, err := p.drv.ListStreams(ctx)
	if err != nil {
		if ctx.Err() == nil {
			p.cfg.Logger.ErrorContext(ctx, "retention: list streams", LogKeyError, err)
		}
		return nil, err
	}
	var infos []PruneInfo
	var errs []error
	for _, s := range streams {
		if p.stopped() || ctx.Err() != nil {
			break
		}
		info, ok := p.pruneStream(ctx, s.Name)
		if !ok {
			continue
		}
		p.report(ctx, info)
		infos = append(infos, info)
		if info.Err != nil {
			errs = append(errs, info.Err)
		}
	}
	return infos, errors.Join(errs...)
}

// pruneStream prunes one stream in batches; ok is false when the stream
// has no retention or no longer exists.
func (p *Pruner) pruneStream(ctx context.Context, stream string) (info PruneInfo, ok bool) {
	var lastBatch time.Duration // how long the previous batch took
	start := p.cfg.Clock.Now()
	info.Stream = stream
	defer func() { info.Duration = p.cfg.Clock.Now().Sub(start) }()
	r, err := p.drv.StreamInfo(ctx, stream)
	if errors.Is(err, rheo.ErrStreamNotFound) {
		return info, false
	}
	if err != nil {
		info.Err = err
		return info, true
	}
	if r.MaxAge == 0 {
		return info, false
	}
	for !p.stopped() {
		if err := ctx.Err(); err != nil {
			info.Err = err
			break
		}
		if info.Batches > 0 && !p.pause(ctx, lastBatch) {
			continue // stopped or cancelled: the loop's checks say which
		}
		batchStart := time.Now()
		n, err := p.drv.Prune(ctx, stream, &rheo.PruneOptions{MaxCount: p.cfg.BatchSize})
		lastBatch = time.Since(batchStart)
		if errors.Is(err, rheo.ErrStreamNotFound) {
			return info, info.Batches > 0 // dropped meanwhile
		}
		if err != nil {
			info.Err = err
			break
		}
		info.Batches++
		info.Deleted += n
		if n < int64(p.cfg.BatchSize) {
			break
		}
	}
	return info, true
}

// pause waits between two batches as Config.Pause says, given how long
// the previous batch took; it returns false when Stop was called or ctx
// ended meanwhile.
func (p *Pruner) pause(ctx context.Context, lastBatch time.Duration) bool {
	d := p.cfg.Pause
	switch {
	case d < 0:
		return true
	case d == 0:
		d = lastBatch
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-p.stop:
		return false
	case <-ctx.Done():
		return false
	}
}

func (p *Pruner) stopped() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// report logs one line for the stream and tells the hook.
func (p *Pruner) report(ctx context.Context, info PruneInfo) {
	attrs := []any{LogKeyStream, info.Stream, LogKeyDeleted, info.Deleted, LogKeyBatches, info.Batches,
		LogKeyDuration, info.Duration}
	switch {
	case info.Err != nil:
		p.cfg.Logger.ErrorContext(ctx, "retention: prune failed", append(attrs, LogKeyError, info.Err)...)
	case info.Deleted > 0:
		p.cfg.Logger.InfoContext(ctx, "retention: pruned", attrs...)
	default:
		p.cfg.Logger.DebugContext(ctx, "retention: nothing to prune", attrs...)
	}
	if p.cfg.Hook != nil {
		p.cfg.Hook.Pruned(ctx, info)
	}
}
