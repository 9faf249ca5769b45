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
	// csrfCookie holds a random value of the browser's; every POST must
	// carry its signature (csrfToken) in its csrfField form field.
	csrfCookie = "rheo_csrf"
	csrfField  = "csrf"
	// sessionCookie proves that the token was typed in on the login page:
	// a nonce of the session's own and its signature.
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
	// sessionKey signs the session cookies: an HMAC of a fixed text
	// keyed by the token, so a cookie never holds the token and changing
	// the token ends every session.
	sessionKey []byte
	// csrfKey signs the CSRF tokens: derived from the credentials when
	// there are any, so that every instance of a dashboard behind one
	// address accepts the others' tokens, else random.
	csrfKey []byte
	path    string
}

func newAuthenticator(token, basic, prefix string) (*authenticator, error) {
	a := &authenticator{path: prefix + "/"}
	if token != "" {
		a.token, a.hasToken = sha256.Sum256([]byte(token)), true
		a.sessionKey = macOf([]byte(token), "rheo dashboard session")
	}
	if basic != "" {
		user, pass, ok := strings.Cut(basic, ":")
		if !ok || user == "" || pass == "" {
			return nil, errors.New("dashboard: Options.BasicAuth must be user:password, both non-empty")
		}
		a.user, a.pass, a.basicUser, a.hasBasic = sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass)), user, true
	}
	if a.enabled() {
		a.csrfKey = macOf([]byte(token+"\x00"+basic), "rheo dashboard csrf")
	} else {
		a.csrfKey = make([]byte, 32)
		_, _ = rand.Read(a.csrfKey) // never fails (crypto/rand)
	}
	return a, nil
}

// macOf is the HMAC-SHA-256 of text keyed by key.
func macOf(key []byte, text string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(text))
	return mac.Sum(nil)
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
		if a.session(r) != "" {
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

// session returns the value of r's session cookie when it is one the
// sign-in page set, else "".
func (a *authenticator) session(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil || !a.hasToken {
		return ""
	}
	nonce, sig, ok := strings.Cut(c.Value, ".")
	want := base64.RawURLEncoding.EncodeToString(macOf(a.sessionKey, nonce))
	if !ok || subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
		return ""
	}
	return c.Value
}

// sessionCookieFor returns the cookie that the sign-in page sets: a
// random nonce of the visitor's own and its signature, so that every
// sign-in is a session of its own, which the CSRF tokens are tied to.
func (a *authenticator) sessionCookieFor(r *http.Request) *http.Cookie {
	nonce := randomToken()
	return &http.Cookie{
		Name: sessionCookie, Value: nonce + "." + base64.RawURLEncoding.EncodeToString(macOf(a.sessionKey, nonce)), Path: a.path,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
}

// randomToken returns 32 random bytes, encoded for a cookie.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
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

// csrfToken returns the CSRF token of r's forms, setting a new random
// value in the CSRF cookie when it has none. The token is a signature of
// the cookie's value and of the visitor's credentials (their session
// cookie, or their basic-auth user): a token works only with the cookie
// it was made for, in the session it was made in, so a cookie planted by
// another site, or a token seen in another session, is refused.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(csrfCookie)
	if err != nil || !validToken(c.Value) {
		c = &http.Cookie{
			Name: csrfCookie, Value: randomToken(), Path: h.opts.Prefix + "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		}
		http.SetCookie(w, c)
		// Later calls in this request see the same cookie.
		r.AddCookie(&http.Cookie{Name: csrfCookie, Value: c.Value})
	}
	return h.csrfFor(r, c.Value)
}

// csrfFor is the CSRF token of the cookie value for r's credentials.
func (h *Handler) csrfFor(r *http.Request, cookie string) string {
	binding := ""
	if session := h.auth.session(r); session != "" {
		binding = "session " + session
	} else if who, ok := h.auth.identify(r); ok {
		binding = "user " + who
	}
	return base64.RawURLEncoding.EncodeToString(macOf(h.auth.csrfKey, cookie+"\x00"+binding))
}

func validToken(s string) bool {
	b, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil && len(b) == 32
}

// csrfValid reports whether the form of a POST carries the token of its
// CSRF cookie and its credentials.
func (h *Handler) csrfValid(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || !validToken(c.Value) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue(csrfField)), []byte(h.csrfFor(r, c.Value))) == 1
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
