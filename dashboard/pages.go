package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// rateWindow is the span the events per second are measured over.
const rateWindow = time.Minute

// maxRanges is how many partitions' watermarks the stream list shows per
// stream; the stream's page shows them all.
const maxRanges = 8

func (h *Handler) newPage(title string, crumbs ...crumb) page {
	return page{
		Title:     title,
		Crumbs:    append([]crumb{{"Streams", h.path()}}, crumbs...),
		RefreshMS: h.opts.RefreshInterval.Milliseconds(),
		Window:    formatWindow(h.opts.SampleWindow),
	}
}

// reqContext bounds the database calls of one request.
func (h *Handler) reqContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.opts.Timeout)
}

// streamRow is one stream of the stream list.
type streamRow struct {
	Name          string
	URL           string
	Partitions    int
	HighWatermark int64
	Retained      int64
	Ranges        []rheo.PartitionRange
	MoreRanges    int
	Retention     time.Duration
	Rate          string
	Groups        int
	CreatedAt     time.Time
	Node          string // on a Citus cluster, the node that holds the stream
}

type streamsData struct {
	page
	Streams []streamRow
	Nodes   bool // some stream names its node: the page shows the column
}

func (h *Handler) streamsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.reqContext(r)
	defer cancel()
	streams, err := h.drv.ListStreams(ctx)
	if err != nil {
		h.fail(w, r, err, "", "")
		return
	}
	data := &streamsData{page: h.newPage("Streams")}
	data.Crumbs = nil
	for _, s := range streams {
		info, err := h.drv.StreamInfo(ctx, s.Name)
		if errors.Is(err, rheo.ErrStreamNotFound) {
			continue // dropped meanwhile
		}
		if err != nil {
			h.fail(w, r, err, s.Name, "")
			return
		}
		groups, err := h.drv.ListGroups(ctx, s.Name)
		if errors.Is(err, rheo.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			h.fail(w, r, err, s.Name, "")
			return
		}
		row := streamRow{
			Name: s.Name, URL: h.path("streams", s.Name), Partitions: s.PartitionCount,
			Retention: info.MaxAge, Groups: len(groups), CreatedAt: s.CreatedAt, Rate: h.rate(s.Name), Node: s.Node,
		}
		data.Nodes = data.Nodes || s.Node != ""
		for i, p := range info.Partitions {
			row.HighWatermark += p.HighWatermark
			row.Retained += p.HighWatermark - p.LowWatermark + 1
			if i < maxRanges {
				row.Ranges = append(row.Ranges, p)
			}
		}
		row.MoreRanges = len(info.Partitions) - len(row.Ranges)
		data.Streams = append(data.Streams, row)
	}
	h.render(w, r, http.StatusOK, "streams", data)
}

// rate renders the sampled events per second of a stream.
func (h *Handler) rate(stream string) string {
	v, ok := h.samples.rate(stream, rateWindow)
	switch {
	case !ok:
		return "…"
	case v == 0:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// groupRow is one group's state.
type groupRow struct {
	Name        string
	URL         string
	MaxAttempts int
	Ordering    rheo.Ordering
	Lag         rheo.Lag
	Info        rheo.GroupInfo
	OldestAge   string
	Chart       template.HTML
	Spark       template.HTML
}

type streamData struct {
	page
	Name       string
	EventsURL  string
	Partitions []rheo.PartitionRange
	Retention  time.Duration
	Rate       string
	HighTotal  int64
	Retained   int64
	CreatedAt  time.Time
	Groups     []groupRow
}

func (h *Handler) streamPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("stream")
	ctx, cancel := h.reqContext(r)
	defer cancel()
	info, err := h.drv.StreamInfo(ctx, name)
	if err != nil {
		h.fail(w, r, err, name, "")
		return
	}
	groups, err := h.drv.ListGroups(ctx, name)
	if err != nil {
		h.fail(w, r, err, name, "")
		return
	}
	data := &streamData{
		page:       h.newPage(name),
		Name:       name,
		EventsURL:  h.path("streams", name, "events"),
		Partitions: info.Partitions,
		Retention:  info.MaxAge,
		Rate:       h.rate(name),
	}
	if streams, err := h.drv.ListStreams(ctx); err == nil {
		for _, s := range streams {
			if s.Name == name {
				data.CreatedAt = s.CreatedAt
			}
		}
	}
	for _, p := range info.Partitions {
		data.HighTotal += p.HighWatermark
		data.Retained += p.HighWatermark - p.LowWatermark + 1
	}
	for _, g := range groups {
		row, err := h.groupState(ctx, name, g)
		if errors.Is(err, rheo.ErrGroupNotFound) {
			continue
		}
		if err != nil {
			h.fail(w, r, err, name, g.Name)
			return
		}
		data.Groups = append(data.Groups, row)
	}
	h.render(w, r, http.StatusOK, "stream", data)
}

// groupState reads a group's lag and summary.
func (h *Handler) groupState(ctx context.Context, stream string, g rheo.GroupSummary) (groupRow, error) {
	lag, err := h.drv.Lag(ctx, stream, g.Name, nil)
	if err != nil {
		return groupRow{}, err
	}
	info, err := h.drv.GroupInfo(ctx, stream, g.Name)
	if err != nil {
		return groupRow{}, err
	}
	row := groupRow{
		Name: g.Name, URL: h.path("streams", stream, "groups", g.Name), MaxAttempts: g.MaxAttempts,
		Ordering: g.Ordering, Lag: lag, Info: info, OldestAge: "none",
	}
	series := h.samples.groupSeries(stream, g.Name)
	row.Chart = lagChart(series, h.opts.SampleWindow, h.clock.Now(), "lag of "+g.Name)
	row.Spark = sparkline(series, h.opts.SampleWindow, h.clock.Now(), "lag of "+g.Name)
	if info.OldestUnsettledTS != nil {
		row.OldestAge = formatAge(h.clock.Now().Sub(*info.OldestUnsettledTS))
	}
	return row, nil
}

// deadLetterRow is one dead letter of a group's page.
type deadLetterRow struct {
	rheo.DeadLetter
	EventURL string
	// Payload is the preview of the event's payload, which the embedded
	// event no longer holds.
	Payload preview
}

type groupData struct {
	page
	Stream, Group string
	State         groupRow
	Partitions    int
	// Leases are the deliveries in progress, the soonest due first.
	Leases      []leaseRow
	DeadLetters []deadLetterRow
	// After is the dead-letter cursor of this page, NextURL the link to
	// the next page ("" on the last one), FirstURL to the first.
	After    string
	NextURL  string
	FirstURL string
	// DryRun: the driver can count a replay without making it.
	DryRun bool
	// ActionPath is the path the action forms post to, without the
	// action's name.
	ActionPath string
}

// leaseRow is a delivery in progress as the group page shows it.
type leaseRow struct {
	rheo.Delivery
	EventURL string
	// DueIn is how long until the lease lapses or the retry comes due;
	// Lapsed marks a lease that lapsed and that nobody claimed again yet.
	DueIn  time.Duration
	Lapsed bool
}

func (h *Handler) groupPage(w http.ResponseWriter, r *http.Request) {
	stream, group := r.PathValue("stream"), r.PathValue("group")
	ctx, cancel := h.reqContext(r)
	defer cancel()
	summary, err := h.findGroup(ctx, stream, group)
	if err != nil {
		h.fail(w, r, err, stream, group)
		return
	}
	state, err := h.groupState(ctx, stream, summary)
	if err != nil {
		h.fail(w, r, err, stream, group)
		return
	}
	leases, err := h.drv.Leases(ctx, stream, group, h.opts.PageSize)
	if err != nil {
		h.fail(w, r, err, stream, group)
		return
	}
	after := r.URL.Query().Get("after")
	var dls []rheo.DeadLetter
	if !isLive(r) { // the dead letters are no live part of the page
		dls, err = h.drv.DeadLetters(ctx, stream, group, &rheo.DeadLetterOptions{MaxCount: h.opts.PageSize, After: after})
		if err != nil {
			h.fail(w, r, err, stream, group)
			return
		}
	}
	groupURL := h.path("streams", stream, "groups", group)
	_, dryRun := h.drv.(driver.Transactor)
	data := &groupData{
		page:       h.newPage(group, crumb{stream, h.path("streams", stream)}),
		Stream:     stream,
		Group:      group,
		State:      state,
		Partitions: len(state.Lag.Partitions),
		After:      after,
		DryRun:     dryRun,
		ActionPath: groupURL,
	}
	if after != "" {
		data.FirstURL = groupURL + "#dead-letters"
	}
	now := h.opts.Clock.Now()
	for _, l := range leases {
		data.Leases = append(data.Leases, leaseRow{
			Delivery: l,
			EventURL: h.eventPath(stream, l.Partition, l.Sequence),
			DueIn:    l.ExpiresAt.Sub(now),
			Lapsed:   l.State == "leased" && !l.ExpiresAt.After(now),
		})
	}
	for i, dl := range dls {
		row := deadLetterRow{
			DeadLetter: dl,
			EventURL:   h.eventPath(stream, dl.Event.Partition, dl.Event.Sequence),
			Payload:    previewJSON(dl.Event.Payload, h.opts.PreviewBytes, true),
		}
		// The page keeps only the previews: the payloads can go while it
		// renders.
		row.Event.Payload, row.Event.Metadata = nil, nil
		dls[i].Event.Payload, dls[i].Event.Metadata = nil, nil
		data.DeadLetters = append(data.DeadLetters, row)
	}
	if len(dls) == h.opts.PageSize {
		data.NextURL = groupURL + "?" + url.Values{"after": {dls[len(dls)-1].Event.ID}}.Encode() + "#dead-letters"
	}
	h.render(w, r, http.StatusOK, "group", data)
}

// findGroup returns the summary of a group, or group_not_found.
func (h *Handler) findGroup(ctx context.Context, stream, group string) (rheo.GroupSummary, error) {
	groups, err := h.drv.ListGroups(ctx, stream)
	if err != nil {
		return rheo.GroupSummary{}, err
	}
	for _, g := range groups {
		if g.Name == group {
			return g, nil
		}
	}
	return rheo.GroupSummary{}, rheo.Errorf(rheo.ErrGroupNotFound, "group %q of stream %q", group, stream)
}

func (h *Handler) eventPath(stream string, partition int, sequence int64) string {
	return h.path("streams", stream, "events", strconv.Itoa(partition), strconv.FormatInt(sequence, 10))
}

// eventRow is one event of a list.
type eventRow struct {
	rheo.Event
	URL           string
	CorrelationID string
	// Payload is one line of the payload, which the embedded event no
	// longer holds.
	Payload preview
}

// listPayloadBytes is the most of a payload an event list shows on its
// one line per event (at most Options.PreviewBytes).
const listPayloadBytes = 160

func (h *Handler) eventRow(ev rheo.Event) eventRow {
	lineage, _ := rheo.LineageOf(ev.Metadata) // a lineage key of another type shows as none
	row := eventRow{
		Event: ev, URL: h.eventPath(ev.Stream, ev.Partition, ev.Sequence),
		CorrelationID: lineage.CorrelationID, Payload: previewJSON(ev.Payload, min(listPayloadBytes, h.opts.PreviewBytes), false),
	}
	row.Event.Payload, row.Event.Metadata = nil, nil
	return row
}

// eventFilters are the fields of the history search form, as typed.
type eventFilters struct {
	Type, Key, CorrelationID, CausationID, Payload, From, To, Partition string
	Desc                                                                bool
}

func (f eventFilters) values() url.Values {
	v := url.Values{}
	for name, s := range map[string]string{
		"type": f.Type, "key": f.Key, "correlation_id": f.CorrelationID, "causation_id": f.CausationID,
		"payload": f.Payload, "from": f.From, "to": f.To, "partition": f.Partition,
	} {
		if s != "" {
			v.Set(name, s)
		}
	}
	if f.Desc {
		v.Set("desc", "1")
	}
	return v
}

type eventsData struct {
	page
	Stream   string
	Action   string
	Filters  eventFilters
	Invalid  string
	Events   []eventRow
	NextURL  string
	NextNote string
	FirstURL string
	Paged    bool
}

// timeLayouts are the forms a time filter may take; those without an
// offset are UTC.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"}

func parseTime(s string) (time.Time, error) {
	for _, layout := range timeLayouts {
		if t, err := time.ParseInLocation(layout, strings.TrimSpace(s), time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: write RFC 3339, such as 2026-01-02T15:04:05Z, or 2026-01-02 15:04 (UTC)", s)
}

// query builds the rheo.Query of the form, or says what is wrong with it.
func (f eventFilters) query() (rheo.Query, error) {
	q := rheo.Query{Type: f.Type, Key: f.Key, Descending: f.Desc}
	if f.Payload != "" {
		trimmed := strings.TrimSpace(f.Payload)
		if !strings.HasPrefix(trimmed, "{") || !json.Valid([]byte(trimmed)) {
			return q, errors.New("the payload filter must be a JSON object, such as {\"symbol\": \"AAPL\"}")
		}
		q.Payload = json.RawMessage(trimmed)
	}
	if f.CorrelationID != "" || f.CausationID != "" {
		q.Metadata = rheo.Lineage{CorrelationID: f.CorrelationID, CausationID: f.CausationID}.Metadata()
	}
	for _, bound := range []struct {
		text string
		dst  **time.Time
	}{{f.From, &q.From}, {f.To, &q.To}} {
		if bound.text == "" {
			continue
		}
		t, err := parseTime(bound.text)
		if err != nil {
			return q, err
		}
		*bound.dst = &t
	}
	if f.Partition != "" {
		p, err := strconv.Atoi(strings.TrimSpace(f.Partition))
		if err != nil {
			return q, fmt.Errorf("the partition %q is not a number", f.Partition)
		}
		q.Partition = &p
	}
	return q, nil
}

func (h *Handler) eventsPage(w http.ResponseWriter, r *http.Request) {
	stream := r.PathValue("stream")
	form := r.URL.Query()
	f := eventFilters{
		Type: form.Get("type"), Key: form.Get("key"), CorrelationID: form.Get("correlation_id"),
		CausationID: form.Get("causation_id"), Payload: form.Get("payload"),
		From: form.Get("from"), To: form.Get("to"), Partition: form.Get("partition"),
		Desc: form.Get("desc") != "",
	}
	base := h.path("streams", stream, "events")
	data := &eventsData{
		page:    h.newPage("Events", crumb{stream, h.path("streams", stream)}),
		Stream:  stream,
		Action:  base,
		Filters: f,
	}
	data.RefreshMS = 0 // a page of history stays as it was read
	q, err := f.query()
	if err != nil {
		data.Invalid = err.Error()
		h.render(w, r, http.StatusBadRequest, "events", data)
		return
	}
	q.MaxCount = h.opts.PageSize
	q.After = form.Get("after")
	data.Paged = q.After != ""
	if data.Paged {
		data.FirstURL = base + "?" + f.values().Encode()
	}
	ctx, cancel := h.reqContext(r)
	defer cancel()
	pg, err := h.drv.Query(ctx, stream, q)
	if err != nil {
		if isBadInput(err) {
			data.Invalid = err.Error()
			h.render(w, r, http.StatusBadRequest, "events", data)
			return
		}
		h.fail(w, r, err, stream, "")
		return
	}
	for _, ev := range pg.Events {
		data.Events = append(data.Events, h.eventRow(ev))
	}
	next := f.values()
	next.Set("after", pg.Cursor)
	switch {
	case len(pg.Events) == q.MaxCount:
		data.NextURL = base + "?" + next.Encode()
		data.NextNote = "Next page"
	case !q.Descending:
		// The cursor of a short ascending page finds the events that
		// match later.
		data.NextURL = base + "?" + next.Encode()
		data.NextNote = "Look for newer events"
	}
	h.render(w, r, http.StatusOK, "events", data)
}

func isBadInput(err error) bool {
	for _, word := range []error{rheo.ErrInvalidArgument, rheo.ErrInvalidPartition, rheo.ErrCursorNotFound, rheo.ErrInvalidReplayOpts} {
		if errors.Is(err, word) {
			return true
		}
	}
	return false
}

// maxLineageScan bounds the search for the event that caused another:
// the driver looks events up by lineage, not by id, so the cause is
// looked for among the events of its conversation and then among the
// events before the one shown.
const maxLineageScan = 1000

// maxCauses is how many events caused by one event its page lists.
const maxCauses = 50

type eventData struct {
	page
	Stream string
	Event  rheo.Event
	// Payload and Metadata are what the page shows of them; JSONURL is
	// the whole event, as JSON.
	Payload      preview
	Metadata     preview
	JSONURL      string
	Lineage      rheo.Lineage
	LineageError string
	CausedBy     *eventRow
	CausedByNote string
	Causes       []eventRow
	CausesURL    string
	MoreCauses   bool
	Conversation string
}

// readEvent reads the event that the request's path names, or answers
// the request with why it cannot; ok is false then.
func (h *Handler) readEvent(ctx context.Context, w http.ResponseWriter, r *http.Request) (ev rheo.Event, ok bool) {
	stream := r.PathValue("stream")
	partition, perr := strconv.Atoi(r.PathValue("partition"))
	sequence, serr := strconv.ParseInt(r.PathValue("sequence"), 10, 64)
	if perr != nil || serr != nil || partition < 0 || sequence < 1 {
		h.errorPage(w, r, http.StatusNotFound, "No such event: an event's address is its partition and sequence.", "")
		return ev, false
	}
	evs, err := h.drv.Read(ctx, stream, &rheo.ReadOptions{Partition: partition, After: sequence - 1, MaxCount: 1})
	if err != nil {
		if errors.Is(err, rheo.ErrInvalidPartition) {
			h.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("Stream %q has no partition %d.", stream, partition), "")
			return ev, false
		}
		h.fail(w, r, err, stream, "")
		return ev, false
	}
	if len(evs) == 0 || evs[0].Sequence != sequence {
		h.errorPage(w, r, http.StatusNotFound,
			fmt.Sprintf("Stream %q has no event %d in partition %d: not appended yet, or pruned.", stream, sequence, partition), "")
		return ev, false
	}
	return evs[0], true
}

// eventJSON serves the whole event as JSON, payload and metadata as
// stored: the link of every preview that was cut. The browser shows it
// as data (nosniff, and a policy that runs nothing).
func (h *Handler) eventJSON(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := h.reqContext(r)
	defer cancel()
	ev, ok := h.readEvent(ctx, w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(ev)
}

func (h *Handler) eventPage(w http.ResponseWriter, r *http.Request) {
	stream := r.PathValue("stream")
	ctx, cancel := h.reqContext(r)
	defer cancel()
	ev, ok := h.readEvent(ctx, w, r)
	if !ok {
		return
	}
	partition, sequence := ev.Partition, ev.Sequence
	data := &eventData{
		page:     h.newPage(fmt.Sprintf("Event %d/%d", partition, sequence), crumb{stream, h.path("streams", stream)}, crumb{"Events", h.path("streams", stream, "events")}),
		Stream:   stream,
		Event:    ev,
		Payload:  previewJSON(ev.Payload, h.opts.EventBytes, true),
		Metadata: previewJSON(ev.Metadata, h.opts.EventBytes, true),
		JSONURL:  h.eventPath(stream, partition, sequence) + "/json",
	}
	data.Event.Payload, data.Event.Metadata = nil, nil // shown through the previews
	data.RefreshMS = 0
	lineage, err := rheo.LineageOf(ev.Metadata)
	if err != nil {
		data.LineageError = err.Error()
	}
	data.Lineage = lineage
	events := h.path("streams", stream, "events")
	if lineage.CorrelationID != "" {
		data.Conversation = events + "?" + url.Values{"correlation_id": {lineage.CorrelationID}}.Encode()
	}
	if lineage.CausationID != "" {
		cause, note, err := h.findCause(ctx, stream, ev, lineage)
		if err != nil {
			h.fail(w, r, err, stream, "")
			return
		}
		data.CausedBy, data.CausedByNote = cause, note
	}
	causes, err := h.drv.Query(ctx, stream, rheo.Query{
		Metadata: rheo.Lineage{CausationID: ev.ID}.Metadata(), MaxCount: maxCauses + 1,
	})
	if err != nil {
		h.fail(w, r, err, stream, "")
		return
	}
	if len(causes.Events) > maxCauses {
		causes.Events, data.MoreCauses = causes.Events[:maxCauses], true
	}
	for _, c := range causes.Events {
		data.Causes = append(data.Causes, h.eventRow(c))
	}
	data.CausesURL = events + "?" + url.Values{"causation_id": {ev.ID}}.Encode()
	h.render(w, r, http.StatusOK, "event", data)
}

// findCause looks for the event whose id is ev's causation id: first
// among the events of ev's conversation (an indexed lookup), then among
// the maxLineageScan events before ev, newest first (the cause of a
// conversation's first step is often its root, which may carry no
// correlation id). It returns nil and a note when it is not found.
func (h *Handler) findCause(ctx context.Context, stream string, ev rheo.Event, lineage rheo.Lineage) (*eventRow, string, error) {
	queries := []rheo.Query{}
	if lineage.CorrelationID != "" {
		queries = append(queries, rheo.Query{Metadata: rheo.Lineage{CorrelationID: lineage.CorrelationID}.Metadata()})
	}
	to := ev.TS
	queries = append(queries, rheo.Query{To: &to, Descending: true})
	for _, q := range queries {
		q.MaxCount = 200
		seen := 0
		for found, err := range driver.QueryAll(ctx, h.drv, stream, q) {
			if err != nil {
				return nil, "", err
			}
			if found.ID == lineage.CausationID {
				row := h.eventRow(found)
				return &row, "", nil
			}
			if seen++; seen >= maxLineageScan {
				break
			}
		}
	}
	return nil, fmt.Sprintf("not found in stream %q among the events of its conversation and the %d before it: it may be in another stream, or pruned",
		stream, maxLineageScan), nil
}
