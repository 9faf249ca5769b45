package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// The cookies the dashboard sets, all HttpOnly and SameSite=Strict, with
// the path of the dashboard's prefix.
const (
	// csrfCookie holds the per-session CSRF token that every POST must
	// repeat in its csrfField form field.
	csrfCookie = "rheo_csrf"
	csrfField  = "csrf"
	// sessionCookie proves that the token was typed in on the login page.
	sessionCookie = "rheo_session"
	// flashCookie carries the outcome of an action to the page the action
	// redirects to.
	flashCookie = "rheo_flash"
)

// contentSecurityPolicy admits the dashboard's own script and stylesheet
// and nothing inline: no payload shown on a page can run as a script, even
// were it not escaped.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// authenticator checks the credentials of Options.Token and
// Options.BasicAuth. Secrets are compared as SHA-256 digests in constant
// time.
type authenticator struct {
	token      [32]byte
	hasToken   bool
	user, pass [32]byte
	basicUser  string
	hasBasic   bool
	// session is the value of the session cookie: an HMAC of a fixed
	// text keyed by the token, so the cookie never holds the token and
	// changing the token ends every session.
	session string
	path    string
}

func newAuthenticator(token, basic, prefix string) (*authenticator, error) {
	a := &authenticator{path: prefix + "/"}
	if token != "" {
		a.token, a.hasToken = sha256.Sum256([]byte(token)), true
		mac := hmac.New(sha256.New, []byte(token))
		mac.Write([]byte("rheo dashboard session"))
		a.session = base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	}
	if basic != "" {
		user, pass, ok := strings.Cut(basic, ":")
		if !ok || user == "" || pass == "" {
			return nil, errors.New("dashboard: Options.BasicAuth must be user:password, both non-empty")
		}
		a.user, a.pass, a.basicUser, a.hasBasic = sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass)), user, true
	}
	return a, nil
}

func (a *authenticator) enabled() bool { return a.hasToken || a.hasBasic }

// identify returns who made r: the basic-auth user, "token" for the
// bearer token or the session cookie, or "anonymous" when no credential
// is configured; ok is false when credentials are configured and r has
// none that is valid.
func (a *authenticator) identify(r *http.Request) (who string, ok bool) {
	if !a.enabled() {
		return "anonymous", true
	}
	if a.hasToken {
		if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && a.tokenMatches(bearer) {
			return "token", true
		}
		if c, err := r.Cookie(sessionCookie); err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(a.session)) == 1 {
			return "token", true
		}
	}
	if a.hasBasic {
		if user, pass, found := r.BasicAuth(); found {
			u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
			if subtle.ConstantTimeCompare(u[:], a.user[:])&subtle.ConstantTimeCompare(p[:], a.pass[:]) == 1 {
				return user, true
			}
		}
	}
	return "", false
}

func (a *authenticator) tokenMatches(s string) bool {
	d := sha256.Sum256([]byte(s))
	return a.hasToken && subtle.ConstantTimeCompare(d[:], a.token[:]) == 1
}

// sessionCookieFor returns the cookie that the login page sets.
func (a *authenticator) sessionCookieFor(r *http.Request) *http.Cookie {
	return &http.Cookie{
		Name: sessionCookie, Value: a.session, Path: a.path,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
}

// securityHeaders sets the headers of every response.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", contentSecurityPolicy)
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("Referrer-Policy", "same-origin")
		hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// csrfToken returns the request's CSRF token, setting a new one in the
// cookie when it has none.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && validToken(c.Value) {
		return c.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	token := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: token, Path: h.opts.Prefix + "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	// Later calls in this request see the same token.
	r.AddCookie(&http.Cookie{Name: csrfCookie, Value: token})
	return token
}

func validToken(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == 32
}

// csrfValid reports whether the form of a POST repeats its cookie's token.
func csrfValid(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || !validToken(c.Value) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue(csrfField)), []byte(c.Value)) == 1
}

// setFlash stores msg for the next page shown.
func (h *Handler) setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	http.SetCookie(w, &http.Cookie{
		Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(msg)), Path: h.opts.Prefix + "/",
		MaxAge: 60, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// takeFlash returns the stored message, if any, and clears it.
func (h *Handler) takeFlash(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: h.opts.Prefix + "/", MaxAge: -1})
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil || len(b) > 1000 {
		return ""
	}
	return string(b)
}
