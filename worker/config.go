package worker

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// The defaults of Config.
const (
	DefaultConcurrency      = 10
	DefaultConsumerDemand   = 100
	DefaultLeaseDuration    = 30 * time.Second
	DefaultPollInterval     = time.Second
	DefaultAckBatchSize     = 100
	DefaultAckFlushInterval = 10 * time.Millisecond
	DefaultSoftStopTimeout  = 20 * time.Second
)

// Fetch back-off after errors: doubling from the first to the last, each
// wait jittered by ±jitterSpread.
const (
	minFetchBackoff = 100 * time.Millisecond
	maxFetchBackoff = 5 * time.Second
)

// refillWindow is how long the fetch loop waits, after a full batch, for
// MaxDemand to leave room for the batch it wants before it fetches what
// room there is.
const refillWindow = 2 * time.Millisecond

// maxCallTimeout bounds every database call of the worker.
const maxCallTimeout = 10 * time.Second

// Config configures a Worker (New) or a Consumer (NewConsumer). Zero
// values take the documented defaults.
type Config struct {
	// Stream is the stream to consume. Required.
	Stream string
	// Group is the consumer group to consume as. Required; the group must
	// exist.
	Group string

	// Handler runs for every leased event. A Worker needs exactly one of
	// Handler and TxHandler; a Consumer takes neither.
	Handler Handler
	// TxHandler runs for every leased event inside a transaction in which
	// the ack commits. It needs a driver that implements
	// driver.Transactor.
	TxHandler TxHandler
	// Concurrency is how many handlers run at once. Workers only.
	// Defaults to 10.
	Concurrency int
	// RetryPolicy chooses how long an event waits before it is claimable
	// again after its handler returned an error other than Retry and
	// Reject, or panicked: lease is the lease that failed (lease.Attempt
	// its attempt) and err what the handler returned (a *PanicError after
	// a panic). A negative duration counts as 0, one beyond 2^31−1
	// milliseconds (about 24.8 days) as that. At the group's max_attempts
	// the event is dead-lettered instead, whatever the delay. Retry(delay,
	// err) keeps its own delay, and an event whose handler fails after a
	// hard stop is retried at once. It is called from the handlers'
	// goroutines, concurrently, and must be quick. Workers only. Defaults
	// to DefaultRetryPolicy: 1s doubling to 5 minutes, ±20% jitter.
	RetryPolicy func(lease rheo.Lease, err error) time.Duration

	// MaxDemand is the most leases held at once: leases queued for a
	// handler slot, whose handler runs, or that wait for their ack to be
	// written, or (Consumer) that were handed out and not settled yet.
	// Fetches never ask for more. For a Worker it must be at least
	// Concurrency and defaults to 2 × Concurrency + 2 × AckBatchSize:
	// every slot busy with a lease queued behind each, while one batch of
	// acks is written and the next one fills. For a Consumer it defaults
	// to 100.
	MaxDemand int
	// LeaseDuration is how long a lease lasts; the worker renews held
	// leases at about half of it. It is rounded down to whole
	// milliseconds. Defaults to 30s.
	LeaseDuration time.Duration
	// PollInterval is how long the worker waits for a wakeup before it
	// fetches anyway, when the last fetch found less than it asked for.
	// Polling is what guarantees progress: wakeups are hints. Defaults
	// to 1s.
	PollInterval time.Duration
	// Partitions limits the worker to these partitions of the stream.
	// Defaults to nil: all partitions.
	Partitions []int
	// ConsumerID names this consumer in leases. Defaults to
	// "<hostname>-<pid>-<random>".
	ConsumerID string

	// AckBatchSize is how many acks are written in one AckBatch call; a
	// batch is written as soon as it is full. Defaults to 100.
	AckBatchSize int
	// AckFlushInterval is the longest an ack waits for its batch to fill
	// before it is written anyway. Acks are also written at once when the
	// worker cannot fetch because of them, on stop, and always in a group
	// ordered by key or partition, whose next events wait for them.
	// Defaults to 10ms.
	AckFlushInterval time.Duration

	// SoftStopTimeout bounds the soft stop that cancelling the context
	// given to Start begins: a Worker's handlers still running, or a
	// Consumer's leases still unsettled, that long after the cancel (by
	// Clock) are cancelled with cause ErrStopped. Negative waits for them
	// however long they take. Defaults to 20s, which leaves a process
	// that Kubernetes stops (30s from SIGTERM to SIGKILL by default) the
	// time to write the retries of the handlers the hard stop cancels.
	SoftStopTimeout time.Duration

	// Logger receives the worker's log records, with the attribute keys
	// LogKey…. Defaults to slog.Default(), as for every logger of Rheo's
	// (the drivers, retention, metrics): set it to
	// slog.New(slog.DiscardHandler) for none.
	Logger *slog.Logger
	// Hooks are told of the worker's events: each element implements one
	// or more of FetchedHook, FetchFailedHook, HandleStartHook,
	// HandledHook, AckedHook, RetriedHook, DeadLetteredHook,
	// RedeliveredHook, RenewedHook, LeaseLostHook and SettleFailedHook.
	// New refuses an element that implements none of them, and one with
	// a method named like a hook but of another signature, which would
	// never be called. Defaults to none.
	Hooks []any
	// Clock schedules lease renewals and polls. Give the driver's clock
	// in tests. Defaults to driver.SystemClock.
	Clock driver.Clock
}

// settings is a Config with its defaults filled in, and what was derived
// from it.
type settings struct {
	Config
	hooks       hookSet
	callTimeout time.Duration
}

// configError reports an invalid Config field.
func configError(format string, args ...any) error {
	return rheo.Errorf(rheo.ErrInvalidArgument, "worker config: "+format, args...)
}

// settle checks cfg and fills in its defaults. forWorker selects the
// Worker's rules (a handler, Concurrency) over the Consumer's.
func (cfg *Config) settle(drv driver.Driver, forWorker bool) (*settings, error) {
	if drv == nil {
		return nil, configError("the driver is nil")
	}
	if cfg == nil {
		return nil, configError("Config is nil")
	}
	s := &settings{Config: *cfg}
	s.Partitions = slices.Clone(cfg.Partitions)
	s.Hooks = slices.Clone(cfg.Hooks)

	if s.Stream == "" {
		return nil, configError("Stream is required")
	}
	if s.Group == "" {
		return nil, configError("Group is required")
	}
	if forWorker {
		if err := s.settleWorker(drv); err != nil {
			return nil, err
		}
	} else {
		if s.Handler != nil || s.TxHandler != nil {
			return nil, configError("Handler and TxHandler must be nil for a Consumer")
		}
		if s.Concurrency != 0 {
			return nil, configError("Concurrency applies to workers only; leave it 0 for a Consumer")
		}
		if s.RetryPolicy != nil {
			return nil, configError("RetryPolicy applies to workers only; a Consumer's caller gives Lease.Retry its delay")
		}
		if s.MaxDemand < 0 {
			return nil, configError("MaxDemand must not be negative (got %d)", s.MaxDemand)
		}
		if s.MaxDemand == 0 {
			s.MaxDemand = DefaultConsumerDemand
		}
	}

	switch {
	case s.LeaseDuration < 0:
		return nil, configError("LeaseDuration must not be negative (got %s)", s.LeaseDuration)
	case s.LeaseDuration == 0:
		s.LeaseDuration = DefaultLeaseDuration
	case s.LeaseDuration < time.Millisecond:
		return nil, configError("LeaseDuration must be at least 1ms (got %s)", s.LeaseDuration)
	case s.LeaseDuration > math.MaxInt32*time.Millisecond:
		return nil, configError("LeaseDuration must be at most %s (got %s)", math.MaxInt32*time.Millisecond, s.LeaseDuration)
	}
	s.LeaseDuration = s.LeaseDuration.Truncate(time.Millisecond)
	s.callTimeout = min(s.LeaseDuration/2, maxCallTimeout)

	if s.PollInterval < 0 {
		return nil, configError("PollInterval must not be negative (got %s)", s.PollInterval)
	}
	if s.PollInterval == 0 {
		s.PollInterval = DefaultPollInterval
	}

	if s.Partitions != nil && len(s.Partitions) == 0 {
		return nil, configError("Partitions must not be empty (nil means all partitions)")
	}
	seen := make(map[int]bool, len(s.Partitions))
	for i, p := range s.Partitions {
		if p < 0 {
			return nil, configError("Partitions[%d] must not be negative (got %d)", i, p)
		}
		if seen[p] {
			return nil, configError("Partitions[%d] repeats partition %d", i, p)
		}
		seen[p] = true
	}

	if s.ConsumerID == "" {
		s.ConsumerID = defaultConsumerID()
	}

	if s.AckBatchSize < 0 {
		return nil, configError("AckBatchSize must not be negative (got %d)", s.AckBatchSize)
	}
	if s.AckBatchSize == 0 {
		s.AckBatchSize = DefaultAckBatchSize
	}
	if s.AckFlushInterval < 0 {
		return nil, configError("AckFlushInterval must not be negative (got %s)", s.AckFlushInterval)
	}
	if s.AckFlushInterval == 0 {
		s.AckFlushInterval = DefaultAckFlushInterval
	}
	if s.SoftStopTimeout == 0 {
		s.SoftStopTimeout = DefaultSoftStopTimeout
	}
	if forWorker && s.MaxDemand == 0 {
		s.MaxDemand = 2*s.Concurrency + 2*s.AckBatchSize
	}

	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	for i, h := range s.Hooks {
		if err := checkHook(h); err != nil {
			return nil, configError("Hooks[%d] (%T) %v", i, h, err)
		}
		s.hooks.add(h)
	}
	if s.Clock == nil {
		s.Clock = driver.SystemClock
	}
	return s, nil
}

// settleWorker checks and fills in the fields only a Worker has.
func (s *settings) settleWorker(drv driver.Driver) error {
	switch {
	case s.Handler == nil && s.TxHandler == nil:
		return configError("one of Handler and TxHandler is required")
	case s.Handler != nil && s.TxHandler != nil:
		return configError("Handler and TxHandler are exclusive; set one")
	}
	if s.TxHandler != nil {
		if _, ok := drv.(driver.Transactor); !ok {
			return configError("TxHandler needs a driver that implements driver.Transactor; %T does not", drv)
		}
	}
	if s.Concurrency < 0 {
		return configError("Concurrency must not be negative (got %d)", s.Concurrency)
	}
	if s.Concurrency == 0 {
		s.Concurrency = DefaultConcurrency
	}
	if s.MaxDemand != 0 && s.MaxDemand < s.Concurrency {
		return configError("MaxDemand (%d) must be at least Concurrency (%d)", s.MaxDemand, s.Concurrency)
	}
	if s.RetryPolicy == nil {
		s.RetryPolicy = DefaultRetryPolicy
	}
	return nil
}

// defaultConsumerID is "<hostname>-<pid>-<random>".
func defaultConsumerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "rheo"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}
