package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/rheo-go/rheo"
	"github.com/rheo-go/rheo/driver"
)

// maxFormBytes bounds the body of an action's POST.
const maxFormBytes = 1 << 16

// actionFunc runs one action, with the CSRF token checked, and returns
// the outcome to log.
type actionFunc func(w http.ResponseWriter, r *http.Request, stream, group string) (result string, attrs []slog.Attr, err error)

// action wraps an action: read-only dashboards refuse it (403), so does a
// form without the session's CSRF token; the outcome is logged.
func (h *Handler) action(fn actionFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		stream, group := r.PathValue("stream"), r.PathValue("group")
		name := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		base := []slog.Attr{
			slog.String(LogKeyAction, name), slog.String(LogKeyWho, who(r)), slog.String(LogKeyRemote, r.RemoteAddr),
			slog.String(LogKeyStream, stream), slog.String(LogKeyGroup, group),
		}
		if !h.opts.AllowActions {
			h.logger.LogAttrs(r.Context(), slog.LevelWarn, "dashboard action refused: read-only",
				append(base, slog.String(LogKeyResult, "refused"))...)
			h.errorPage(w, r, http.StatusForbidden, "This dashboard is read-only: actions are disabled.",
				"Start rheo serve with --allow-actions (or set Options.AllowActions) to reopen, replay and reset.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil || !h.csrfValid(r) {
			h.logger.LogAttrs(r.Context(), slog.LevelWarn, "dashboard action refused: no valid CSRF token",
				append(base, slog.String(LogKeyResult, "refused"))...)
			h.errorPage(w, r, http.StatusForbidden, "Refused: the form's security token is missing or out of date.",
				"Reload the page and submit the form again.")
			return
		}
		result, attrs, err := fn(w, r, stream, group)
		attrs = append(base, attrs...)
		switch {
		case err != nil:
			h.logger.LogAttrs(r.Context(), slog.LevelWarn, "dashboard action failed",
				append(attrs, slog.String(LogKeyResult, "failed"), slog.String(LogKeyError, err.Error()))...)
			h.fail(w, r, err, stream, group)
		case result != "":
			h.logger.LogAttrs(r.Context(), slog.LevelInfo, "dashboard action", append(attrs, slog.String(LogKeyResult, result))...)
		}
	}
}

// reopen makes one dead letter (or acked event) claimable again: Replay
// by event id.
func (h *Handler) reopen(w http.ResponseWriter, r *http.Request, stream, group string) (string, []slog.Attr, error) {
	id := r.PostFormValue("event_id")
	attrs := []slog.Attr{slog.String(LogKeyParams, "event_id="+id)}
	if id == "" {
		return "", attrs, rheo.Errorf(rheo.ErrInvalidArgument, "no event id given")
	}
	ctx, cancel := h.reqContext(r)
	defer cancel()
	n, err := h.drv.Replay(ctx, stream, group, &rheo.ReplayOptions{EventIDs: []string{id}})
	if err != nil {
		return "", attrs, err
	}
	msg := fmt.Sprintf("Reopened event %s: it is claimable again for group %s, from attempt 1.", id, group)
	if n == 0 {
		msg = fmt.Sprintf("Event %s was not reopened: it is no longer a dead letter of group %s (reopened or reset already).", id, group)
	}
	h.setFlash(w, r, msg)
	http.Redirect(w, r, h.path("streams", stream, "groups", group), http.StatusSeeOther)
	return fmt.Sprintf("reopened %d", n), attrs, nil
}

// replayForm is the replay form as posted.
type replayForm struct {
	Mode         string // "sequence" or "time"
	FromSequence string
	FromTime     string
	Partitions   string
}

type replayData struct {
	page
	Stream, Group string
	Form          replayForm
	Action        string
	GroupURL      string
	Counts        []driver.PartitionCount
	Total         int64
	Counted       bool
	Invalid       string
}

// replay runs in two steps: step=count runs the replay in a transaction
// that is rolled back and shows what it would make claimable again, with
// a button that posts step=confirm, which replays.
func (h *Handler) replay(w http.ResponseWriter, r *http.Request, stream, group string) (string, []slog.Attr, error) {
	f := replayForm{
		Mode: r.PostFormValue("mode"), FromSequence: strings.TrimSpace(r.PostFormValue("from_sequence")),
		FromTime: strings.TrimSpace(r.PostFormValue("from_time")), Partitions: strings.TrimSpace(r.PostFormValue("partitions")),
	}
	step := r.PostFormValue("step")
	attrs := []slog.Attr{slog.String(LogKeyParams, fmt.Sprintf("mode=%s from_sequence=%s from_time=%s partitions=%s step=%s",
		f.Mode, f.FromSequence, f.FromTime, f.Partitions, step))}
	groupURL := h.path("streams", stream, "groups", group)
	data := &replayData{
		page:   h.newPage("Replay "+group, crumb{stream, h.path("streams", stream)}, crumb{group, groupURL}),
		Stream: stream, Group: group, Form: f, Action: groupURL + "/replay", GroupURL: groupURL,
	}
	data.RefreshMS = 0
	opts, partitions, err := f.options()
	if err != nil {
		data.Invalid = err.Error()
		h.render(w, r, http.StatusBadRequest, "replay", data)
		return "", attrs, nil
	}
	ctx, cancel := h.reqContext(r)
	defer cancel()
	dryRun := step != "confirm"
	counts, err := driver.ReplayByPartition(ctx, h.drv, stream, group, &opts,
		&driver.ReplayByPartitionOptions{Partitions: partitions, DryRun: dryRun})
	if errors.Is(err, driver.ErrNoTransactions) {
		if dryRun {
			data.Invalid = "This driver cannot count a replay without making it (no transactions): confirm to replay without a count."
			h.render(w, r, http.StatusOK, "replay", data)
			return "", attrs, nil
		}
		opts.Partitions = partitions
		n, err := h.drv.Replay(ctx, stream, group, &opts)
		if err != nil {
			return "", attrs, err
		}
		counts = []driver.PartitionCount{{Partition: -1, Events: n}}
	} else if err != nil {
		if isBadInput(err) {
			data.Invalid = err.Error()
			h.render(w, r, http.StatusBadRequest, "replay", data)
			return "", attrs, nil
		}
		return "", attrs, err
	}
	var total int64
	for _, c := range counts {
		total += c.Events
	}
	if dryRun {
		data.Counts, data.Total, data.Counted = counts, total, true
		h.render(w, r, http.StatusOK, "replay", data)
		return fmt.Sprintf("dry run: would replay %d", total), attrs, nil
	}
	h.setFlash(w, r, fmt.Sprintf("Replayed %d events: they are claimable again for group %s, from attempt 1.", total, group))
	http.Redirect(w, r, groupURL, http.StatusSeeOther)
	return fmt.Sprintf("replayed %d", total), attrs, nil
}

// options turns the form into replay options and the partitions listed
// (nil: all).
func (f replayForm) options() (rheo.ReplayOptions, []int, error) {
	var opts rheo.ReplayOptions
	switch f.Mode {
	case "sequence":
		n, err := strconv.ParseInt(f.FromSequence, 10, 64)
		if err != nil || n < 0 {
			return opts, nil, fmt.Errorf("the sequence to replay after must be a whole number, 0 or more, got %q", f.FromSequence)
		}
		opts.FromSequence = &n
	case "time":
		t, err := parseTime(f.FromTime)
		if err != nil {
			return opts, nil, err
		}
		opts.FromTS = &t
	default:
		return opts, nil, errors.New("choose to replay from a sequence or from a time")
	}
	partitions, err := parsePartitions(f.Partitions)
	return opts, partitions, err
}

// parsePartitions reads "0, 2, 3" as sorted partitions, "" as nil (all).
func parsePartitions(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || p < 0 {
			return nil, fmt.Errorf("partitions are numbers separated by commas, got %q", s)
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

type resetForm struct {
	StartAfter string
	StartAt    string
	Partitions string
}

type resetData struct {
	page
	Stream, Group string
	Form          resetForm
	Action        string
	GroupURL      string
	State         groupRow
	Invalid       string
}

// reset runs in two steps: step=review shows what the reset drops and
// asks for the group's name, which step=confirm must carry.
func (h *Handler) reset(w http.ResponseWriter, r *http.Request, stream, group string) (string, []slog.Attr, error) {
	f := resetForm{
		StartAfter: strings.TrimSpace(r.PostFormValue("start_after")),
		StartAt:    strings.TrimSpace(r.PostFormValue("start_at")),
		Partitions: strings.TrimSpace(r.PostFormValue("partitions")),
	}
	step := r.PostFormValue("step")
	attrs := []slog.Attr{slog.String(LogKeyParams, fmt.Sprintf("start_after=%s start_at=%s partitions=%s step=%s",
		f.StartAfter, f.StartAt, f.Partitions, step))}
	groupURL := h.path("streams", stream, "groups", group)
	ctx, cancel := h.reqContext(r)
	defer cancel()
	summary, err := h.findGroup(ctx, stream, group)
	if err != nil {
		return "", attrs, err
	}
	state, err := h.groupState(ctx, stream, summary)
	if err != nil {
		return "", attrs, err
	}
	data := &resetData{
		page:   h.newPage("Reset "+group, crumb{stream, h.path("streams", stream)}, crumb{group, groupURL}),
		Stream: stream, Group: group, Form: f, Action: groupURL + "/reset", GroupURL: groupURL, State: state,
	}
	data.RefreshMS = 0
	opts := rheo.ResetOptions{Confirm: true}
	var invalid error
	if f.StartAfter != "" && f.StartAt != "" {
		invalid = errors.New("give a sequence to start after or a time to start at, not both")
	}
	if f.StartAfter != "" && invalid == nil {
		n, err := strconv.ParseInt(f.StartAfter, 10, 64)
		if err != nil || n < 0 {
			invalid = fmt.Errorf("the sequence to start after must be a whole number, 0 or more, got %q", f.StartAfter)
		}
		opts.StartAfter = &n
	}
	if f.StartAt != "" && invalid == nil {
		t, err := parseTime(f.StartAt)
		invalid = err
		opts.StartAt = &t
	}
	if invalid == nil {
		opts.Partitions, invalid = parsePartitions(f.Partitions)
	}
	if invalid != nil {
		data.Invalid = invalid.Error()
		h.render(w, r, http.StatusBadRequest, "reset", data)
		return "", attrs, nil
	}
	if step != "confirm" {
		h.render(w, r, http.StatusOK, "reset", data)
		return "", attrs, nil
	}
	if r.PostFormValue("confirm_group") != group {
		data.Invalid = fmt.Sprintf("Type the group's name, %s, to confirm the reset. Nothing was changed.", group)
		h.render(w, r, http.StatusUnprocessableEntity, "reset", data)
		return "", attrs, nil
	}
	if err := h.drv.ResetGroup(ctx, stream, group, &opts); err != nil {
		if isBadInput(err) {
			data.Invalid = err.Error()
			h.render(w, r, http.StatusBadRequest, "reset", data)
			return "", attrs, nil
		}
		return "", attrs, err
	}
	h.setFlash(w, r, fmt.Sprintf("Reset group %s: its leases, pending retries and dead letters were dropped and its cursors moved.", group))
	http.Redirect(w, r, groupURL, http.StatusSeeOther)
	return "reset", attrs, nil
}

// fail shows err as a page with the status it calls for.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error, stream, group string) {
	switch {
	case errors.Is(err, rheo.ErrStreamNotFound):
		h.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("Stream %q not found.", stream), "It may have been dropped.")
		return
	case errors.Is(err, rheo.ErrGroupNotFound):
		h.errorPage(w, r, http.StatusNotFound, fmt.Sprintf("Group %q not found on stream %q.", group, stream), "It may have been dropped.")
		return
	case rheo.KindOf(err) == rheo.KindPermissionDenied:
		h.errorPage(w, r, http.StatusForbidden,
			"The database refused: the role the dashboard logs in as lacks the privilege for this (permission denied). Nothing was changed.",
			"The pages need rheo_reader; reopening, replaying and resetting need rheo_admin (docs/security.md): GRANT rheo_admin TO <the role>;")
		return
	case isBadInput(err):
		h.errorPage(w, r, http.StatusBadRequest, err.Error(), "")
		return
	}
	// What remains names the database's address, user and name, or the
	// driver's words: the log gets them, the visitor a generic message.
	h.logger.ErrorContext(r.Context(), "dashboard: request failed", LogKeyRemote, r.RemoteAddr,
		LogKeyStream, stream, LogKeyGroup, group, LogKeyError, err.Error())
	const hint = "The dashboard's log has the details."
	switch {
	case errors.Is(err, rheo.ErrBackendUnavailable):
		h.errorPage(w, r, http.StatusServiceUnavailable, "The database does not answer.", hint)
	case errors.Is(err, context.DeadlineExceeded):
		h.errorPage(w, r, http.StatusGatewayTimeout, fmt.Sprintf("The database did not answer within %s.", h.opts.Timeout), hint)
	case errors.Is(err, rheo.ErrAmbiguous):
		h.errorPage(w, r, http.StatusInternalServerError,
			"The database's answer was lost: the action may or may not have been made. Check the group's state before trying again.", hint)
	default:
		h.errorPage(w, r, http.StatusInternalServerError, "The request failed.", hint)
	}
}
