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
	"github.com/rheo-go/rheo/internal/textsafe"
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
		"neg":   func(d time.Duration) time.Duration { return -d },
		"num":   formatNum,
		"dur":   formatRetention,
		"retained": func(p rheo.PartitionRange) int64 {
			return p.HighWatermark - p.LowWatermark + 1
		},
		"show": func(s string) string { return cutText(textsafe.Visible(s), h.opts.PreviewBytes) },
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
	if !isLive(r) {
		p.Flash = h.takeFlash(w, r)
	}
	// The script's refreshes ask for the live parts alone.
	tmpl := "layout"
	if isLive(r) && h.pages[name].Lookup("live") != nil {
		tmpl = "live"
	}
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, tmpl, data); err != nil {
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

// isLive reports a request of the script's refresh, which swaps only
// the page's live parts.
func isLive(r *http.Request) bool { return r.Header.Get("X-Rheo-Live") != "" }

// preview is a payload, or another stored document, as a page shows it:
// at most a given number of bytes of it, with its escapes visible.
type preview struct {
	// Text is what is shown.
	Text string
	// Cut: Text is the beginning of a longer document: the first Shown
	// of its Size bytes.
	Cut         bool
	Shown, Size int64
}

// previewJSON returns at most n bytes of raw for reading: indented when
// it is short enough to be indented whole (and still fits), else as it
// is stored, cut; either way shown as text, its control and invisible
// characters escaped. A long document is never indented or compacted
// whole: a page's cost is bounded by n, not by what was stored.
func previewJSON(raw json.RawMessage, n int, indent bool) preview {
	p := preview{Size: int64(len(raw))}
	var s string
	if len(raw) <= n {
		s = string(raw)
		var buf bytes.Buffer
		if indent && json.Indent(&buf, raw, "", "  ") == nil {
			s = buf.String()
		} else if !indent && json.Compact(&buf, raw) == nil {
			s = buf.String()
		}
		if len(s) > 4*n {
			s = string(raw) // deep nesting: the indentation would outgrow the preview
		}
	} else {
		s, p.Cut = cutUTF8(string(raw[:n+1]), n), true
		p.Shown = int64(len(s))
	}
	p.Text = textsafe.VisibleLines(s)
	if !indent {
		p.Text = textsafe.Visible(s)
	}
	return p
}

// cutUTF8 returns at most n bytes of s, not inside a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}

// cutText returns at most n bytes of s, ending with "…" when cut.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutUTF8(s, n) + "…"
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
