package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/rheo-go/rheo"
)

// page is what every page's data carries for the layout.
type page struct {
	Title string
	// Crumbs are the links above the title, from the root down.
	Crumbs []crumb
	// Flash is the outcome of the last action.
	Flash string
	// Actions: the action controls are shown.
	Actions bool
	// CSRF is the token the action forms carry.
	CSRF string
	// RefreshMS is how often the script refreshes the live parts of the
	// page, 0 for never.
	RefreshMS int64
	// Window is the span of the charts, such as "10m".
	Window string
}

type crumb struct{ Name, URL string }

func (p *page) base() *page { return p }

type pageData interface{ base() *page }

// pageNames are the page templates, each parsed with the layout.
var pageNames = []string{"streams", "stream", "group", "events", "event", "replay", "reset", "error", "login"}

func parseTemplates(h *Handler) (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"path":  h.path,
		"asset": func(name string) string { return h.opts.Prefix + "/assets/" + name },
		"time":  formatTime,
		"age":   formatAge,
		"num":   formatNum,
		"dur":   formatRetention,
		"retained": func(p rheo.PartitionRange) int64 {
			return p.HighWatermark - p.LowWatermark + 1
		},
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes the page name with data and status.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, data pageData) {
	p := data.base()
	p.Actions = h.opts.AllowActions
	if p.Actions {
		p.CSRF = h.csrfToken(w, r)
	}
	if r.Header.Get("X-Rheo-Live") == "" {
		p.Flash = h.takeFlash(w, r)
	}
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		h.logger.ErrorContext(r.Context(), "dashboard: render "+name, LogKeyError, err)
		http.Error(w, "internal error: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

type errorData struct {
	page
	Message, Hint string
}

// errorPage shows a message with status.
func (h *Handler) errorPage(w http.ResponseWriter, r *http.Request, status int, msg, hint string) {
	h.render(w, r, status, "error", &errorData{
		page:    page{Title: http.StatusText(status)},
		Message: msg, Hint: hint,
	})
}

// pretty returns JSON indented for reading; what is not valid JSON is
// returned as it is. Either way it is shown as text.
func pretty(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// compact returns JSON on one line, cut to at most n bytes.
func compact(raw json.RawMessage, n int) string {
	var buf bytes.Buffer
	s := string(raw)
	if err := json.Compact(&buf, raw); err == nil {
		s = buf.String()
	}
	if len(s) > n {
		cut := n
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut-- // not inside a UTF-8 sequence
		}
		s = s[:cut] + "…"
	}
	return s
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// formatAge renders a duration for people: 950ms, 42s, 3m12s, 5h04m, 3d4h.
func formatAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}

func formatRetention(d time.Duration) string {
	if d == 0 {
		return "forever"
	}
	if d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

// formatNum writes an integer with thin groups of three digits.
func formatNum(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var out []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, c)
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
