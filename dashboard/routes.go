package dashboard

import (
	"context"
	"embed"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
)

//go:embed templates/*.html assets/*
var files embed.FS

// whoKey carries the authenticated caller in a request's context.
type whoKey struct{}

func who(r *http.Request) string {
	if s, ok := r.Context().Value(whoKey{}).(string); ok {
		return s
	}
	return "anonymous"
}

// routes builds the handler: security headers, authentication, the
// prefix, cross-origin protection of POSTs, and the pages.
func (h *Handler) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.streamsPage)
	mux.HandleFunc("GET /streams/{stream}", h.streamPage)
	mux.HandleFunc("GET /streams/{stream}/groups/{group}", h.groupPage)
	mux.HandleFunc("GET /streams/{stream}/events", h.eventsPage)
	mux.HandleFunc("GET /streams/{stream}/events/{partition}/{sequence}", h.eventPage)
	mux.HandleFunc("GET /streams/{stream}/events/{partition}/{sequence}/json", h.eventJSON)
	mux.HandleFunc("POST /streams/{stream}/groups/{group}/reopen", h.action(h.reopen))
	mux.HandleFunc("POST /streams/{stream}/groups/{group}/replay", h.action(h.replay))
	mux.HandleFunc("POST /streams/{stream}/groups/{group}/reset", h.action(h.reset))
	mux.HandleFunc("POST /login", h.login)
	assets, _ := fs.Sub(files, "assets") // cannot fail: the directory is embedded
	static := http.FileServerFS(assets)
	mux.Handle("GET /assets/", http.StripPrefix("/assets", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		static.ServeHTTP(w, r)
	})))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.errorPage(w, r, http.StatusNotFound, "No such page.", "")
	})

	var inner http.Handler = mux
	if h.opts.Prefix != "" {
		inner = http.StripPrefix(h.opts.Prefix, inner)
	}
	// Go's cross-origin protection refuses POSTs that a browser marks as
	// coming from another origin (Sec-Fetch-Site, Origin): a second line
	// behind the CSRF token.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.errorPage(w, r, http.StatusForbidden, "Refused: this request came from another site.", "")
	}))
	inner = cop.Handler(inner)
	return securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := h.auth.identify(r)
		if !ok && !(r.Method == http.MethodPost && r.URL.Path == h.opts.Prefix+"/login") &&
			!strings.HasPrefix(r.URL.Path, h.opts.Prefix+"/assets/") {
			h.unauthorized(w, r)
			return
		}
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, name)))
	}))
}

// unauthorized answers 401 with the login page: basic authentication's
// challenge when it is configured, and a form for the token when that is.
func (h *Handler) unauthorized(w http.ResponseWriter, r *http.Request) {
	if h.auth.hasBasic {
		w.Header().Set("WWW-Authenticate", `Basic realm="Rheo dashboard", charset="UTF-8"`)
	}
	next := r.URL.RequestURI()
	if r.Method != http.MethodGet {
		next = h.opts.Prefix + "/"
	}
	h.render(w, r, http.StatusUnauthorized, "login", &loginPage{
		page:      page{Title: "Sign in"},
		HasToken:  h.auth.hasToken,
		HasBasic:  h.auth.hasBasic,
		Next:      next,
		LoginPath: h.opts.Prefix + "/login",
	})
}

type loginPage struct {
	page
	HasToken, HasBasic bool
	Next, LoginPath    string
	Failed             bool
}

// login checks the token typed into the login page and sets the session
// cookie.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if !h.auth.hasToken || !h.auth.tokenMatches(r.PostFormValue("token")) {
		h.logger.WarnContext(r.Context(), "dashboard: sign-in refused", LogKeyRemote, r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="Rheo dashboard"`)
		h.render(w, r, http.StatusUnauthorized, "login", &loginPage{
			page: page{Title: "Sign in"}, HasToken: h.auth.hasToken, HasBasic: h.auth.hasBasic,
			Next: r.PostFormValue("next"), LoginPath: h.opts.Prefix + "/login", Failed: true,
		})
		return
	}
	http.SetCookie(w, h.auth.sessionCookieFor(r))
	http.Redirect(w, r, h.localPath(r.PostFormValue("next")), http.StatusSeeOther)
}

// localPath returns next when it is a path of the dashboard, else the
// dashboard's root: a redirect never leaves it. The path is cleaned
// before it is checked (dot segments, percent-encoded ones included, as
// the server will resolve them), and a path that needed cleaning is
// returned cleaned.
func (h *Handler) localPath(next string) string {
	root := h.opts.Prefix + "/"
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) {
		return root
	}
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") && clean != "/" {
		clean += "/"
	}
	if !strings.HasPrefix(clean, root) {
		return root
	}
	if clean != u.Path {
		return (&url.URL{Path: clean, RawQuery: u.RawQuery, Fragment: u.Fragment}).String()
	}
	return next
}

// path returns the dashboard path of the given segments, each escaped.
func (h *Handler) path(segments ...string) string {
	var b strings.Builder
	b.WriteString(h.opts.Prefix)
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	if len(segments) == 0 {
		b.WriteByte('/')
	}
	return b.String()
}
