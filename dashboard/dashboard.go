// Package dashboard is Rheo's web dashboard: an http.Handler that shows
// the streams, groups, dead letters and history of a Rheo database, and,
// when allowed, reopens dead letters, replays and resets groups.
//
// `rheo serve` serves it at /. A host mounts it in its own server under a
// prefix of its choice:
//
//	h, err := dashboard.New(ctx, drv, &dashboard.Options{Prefix: "/rheo"})
//	if err != nil {
//		return err
//	}
//	defer h.Close()
//	mux.Handle("/rheo/", h)
//
// The pages are rendered on the server with html/template, which escapes
// everything taken from the database (payloads are untrusted JSON: they
// are shown pretty-printed, as text). The templates, the stylesheet and
// the one script are embedded in the binary (go:embed); there is no build
// step. The script refreshes the live parts of a page every few seconds
// by fetching them alone (the server renders only those parts for its
// requests); the Content-Security-Policy admits scripts from the
// handler's own files only, so nothing shown can run as one. Control,
// bidirectional and zero-width characters of stored text are shown as
// escapes (\u202e), and every payload and stored text is cut to a
// preview (Options.PreviewBytes, Options.EventBytes) with a link to the
// whole event, so that no page grows with what was stored.
//
// The handler samples every stream's high watermarks and every group's
// lag every few seconds, in a goroutine, and keeps a few minutes of them
// in memory for the event rates and the lag charts. The goroutine ends
// with Close or with the context given to New.
//
// Actions (reopening a dead letter, replaying a group, resetting one) are
// off unless Options.AllowActions is set: a read-only dashboard shows no
// control for them and answers their POSTs with 403. Every action is a
// POST carrying a CSRF token, and is logged. The role the driver logs in
// as needs rheo_reader to show the pages and rheo_admin for the actions
// (docs/security.md); without it the database refuses (permission_denied),
// which the dashboard shows as such.
//
// Options.Token and Options.BasicAuth, when set, are required for every
// page and action (docs/ops.md#the-dashboard says how rheo serve sets
// them, and the security model).
package dashboard

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rheo-go/rheo/driver"
)

// The defaults of Options.
const (
	DefaultSampleInterval  = 5 * time.Second
	DefaultSampleWindow    = 10 * time.Minute
	DefaultRefreshInterval = 2 * time.Second
	DefaultTimeout         = 10 * time.Second
	DefaultPageSize        = 50
	// DefaultPreviewBytes bounds what a list shows of a payload, a reason
	// or another stored text: a page of 50 dead letters stays under a
	// few hundred kilobytes whatever their payloads.
	DefaultPreviewBytes = 1 << 10
	// DefaultEventBytes bounds what an event's page shows of its payload
	// and of its metadata; the whole event is a link away, as JSON.
	DefaultEventBytes = 64 << 10
)

// The attribute keys of the log records of actions.
const (
	LogKeyAction = "action"
	LogKeyWho    = "who"
	LogKeyRemote = "remote"
	LogKeyStream = "stream"
	LogKeyGroup  = "group"
	LogKeyParams = "params"
	LogKeyResult = "result"
	LogKeyError  = "error"
)

// Options are the optional settings of a dashboard. A nil *Options means
// the defaults.
type Options struct {
	// Prefix is the path the dashboard is mounted under, such as "/rheo":
	// it must start with "/" and not end with one. The host routes
	// Prefix+"/" and everything under it to the handler. Defaults to "",
	// the root.
	Prefix string
	// AllowActions shows the action controls and accepts their POSTs:
	// reopening dead letters, replaying and resetting groups. Defaults to
	// false: read-only.
	AllowActions bool
	// Token, when set, is required of every request (but those of the
	// stylesheet and the script, which the sign-in page uses): as a bearer token
	// (Authorization: Bearer …), or through the session cookie that the
	// dashboard's login page sets once the token was typed in.
	Token string
	// BasicAuth, when set as "user:password", is required of every
	// request as HTTP basic authentication (a request with the Token
	// passes too).
	BasicAuth string
	// Logger receives a record for every action (who, what, the result)
	// and for sampling failures. Defaults to slog.Default().
	Logger *slog.Logger
	// SampleInterval is how often the stream watermarks and group lags
	// are sampled for the rates and charts. Defaults to
	// DefaultSampleInterval.
	SampleInterval time.Duration
	// SampleWindow is how much sampled history is kept and charted.
	// Defaults to DefaultSampleWindow.
	SampleWindow time.Duration
	// RefreshInterval is how often an open page refreshes its live parts.
	// Defaults to DefaultRefreshInterval.
	RefreshInterval time.Duration
	// Timeout bounds the database calls of one request and of one
	// sampling round. Defaults to DefaultTimeout.
	Timeout time.Duration
	// PageSize is how many dead letters or events a page shows. Defaults
	// to DefaultPageSize.
	PageSize int
	// PreviewBytes is the most bytes of a payload, a reason, an id, a
	// type or a key that the lists of events, dead letters and leases
	// show; what is cut ends with "…" and a link to the whole event.
	// Defaults to DefaultPreviewBytes.
	PreviewBytes int
	// EventBytes is the most bytes of its payload and of its metadata
	// that an event's page shows, with a link to the whole event as JSON
	// when they are longer. Defaults to DefaultEventBytes.
	EventBytes int
	// Clock gives the time ages are measured against and schedules the
	// sampling rounds. Defaults to driver.SystemClock.
	Clock driver.Clock
}

// Handler is the dashboard: an http.Handler, with the sampling goroutine
// that Close stops.
type Handler struct {
	drv      driver.Driver
	opts     Options
	logger   *slog.Logger
	clock    driver.Clock
	mux      http.Handler
	pages    map[string]*template.Template
	samples  *sampler
	auth     *authenticator
	cancel   context.CancelFunc
	stopped  chan struct{}
	closeOne sync.Once
}

// New returns the dashboard of drv and starts its sampling goroutine,
// which runs until ctx ends or Close is called. opts may be nil. It fails
// only on invalid options, naming the field.
func New(ctx context.Context, drv driver.Driver, opts *Options) (*Handler, error) {
	if drv == nil {
		return nil, errors.New("dashboard: the driver is nil")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.settle(); err != nil {
		return nil, err
	}
	auth, err := newAuthenticator(o.Token, o.BasicAuth, o.Prefix)
	if err != nil {
		return nil, err
	}
	h := &Handler{
		drv:     drv,
		opts:    o,
		logger:  o.Logger,
		clock:   o.Clock,
		auth:    auth,
		stopped: make(chan struct{}),
	}
	if h.pages, err = parseTemplates(h); err != nil {
		return nil, err
	}
	size := int(o.SampleWindow/o.SampleInterval) + 1
	h.samples = newSampler(drv, size, o.Timeout, o.Logger, o.Clock)
	h.mux = h.routes()
	ctx, h.cancel = context.WithCancel(ctx)
	go func() {
		defer close(h.stopped)
		h.samples.run(ctx, o.SampleInterval)
	}()
	return h, nil
}

func (o *Options) settle() error {
	if o.Prefix != "" && (!strings.HasPrefix(o.Prefix, "/") || strings.HasSuffix(o.Prefix, "/")) {
		return fmt.Errorf("dashboard: Options.Prefix must start with / and not end with one, got %q", o.Prefix)
	}
	for name, d := range map[string]*time.Duration{
		"SampleInterval": &o.SampleInterval, "SampleWindow": &o.SampleWindow,
		"RefreshInterval": &o.RefreshInterval, "Timeout": &o.Timeout,
	} {
		if *d < 0 {
			return fmt.Errorf("dashboard: Options.%s must not be negative, got %s", name, *d)
		}
	}
	for name, n := range map[string]int{"PageSize": o.PageSize, "PreviewBytes": o.PreviewBytes, "EventBytes": o.EventBytes} {
		if n < 0 {
			return fmt.Errorf("dashboard: Options.%s must not be negative, got %d", name, n)
		}
	}
	if o.SampleInterval == 0 {
		o.SampleInterval = DefaultSampleInterval
	}
	if o.SampleWindow == 0 {
		o.SampleWindow = DefaultSampleWindow
	}
	if o.SampleWindow < o.SampleInterval {
		return fmt.Errorf("dashboard: Options.SampleWindow (%s) must be at least SampleInterval (%s)", o.SampleWindow, o.SampleInterval)
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = DefaultRefreshInterval
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.PageSize == 0 {
		o.PageSize = DefaultPageSize
	}
	if o.PreviewBytes == 0 {
		o.PreviewBytes = DefaultPreviewBytes
	}
	if o.EventBytes == 0 {
		o.EventBytes = DefaultEventBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = driver.SystemClock
	}
	return nil
}

// ServeHTTP serves the dashboard's pages, assets and actions.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// Close stops the sampling goroutine and waits for it to end. The handler
// still serves afterwards, without new samples. It returns nil.
func (h *Handler) Close() error {
	h.closeOne.Do(h.cancel)
	<-h.stopped
	return nil
}
