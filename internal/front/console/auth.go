package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/toolpool/toolpool/internal/front/httpapi"
)

// cookieName is the session cookie.
const cookieName = "toolpool_ui"

// csrfField is the form field (and csrfHeader the header of script
// requests) that carries the session's CSRF token.
const (
	csrfField  = "csrf"
	csrfHeader = "X-Toolpool-Csrf"
)

// session is one operator's login.
type session struct {
	operator string
	csrf     string
	expires  time.Time
}

// sessions are the logins, in memory: a restarted orchestrator asks
// operators to log in again.
type sessions struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]*session
}

func newSessions(ttl time.Duration) *sessions {
	return &sessions{ttl: ttl, m: map[string]*session{}}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// create starts a session for operator and returns its id.
// maxSessions bounds the sessions kept: an open console (no tokens) gives
// every browser without a cookie one, so a client that never keeps its
// cookie must not grow the map (nor make each login sweep it).
const maxSessions = 10_000

func (s *sessions) create(operator string) (string, *session) {
	id := randomToken()
	ss := &session{operator: operator, csrf: randomToken(), expires: time.Now().Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxSessions {
		now := time.Now()
		for k, v := range s.m { // drop the expired ones once the map is full
			if now.After(v.expires) {
				delete(s.m, k)
			}
		}
		for k := range s.m { // still full (an open console probed without cookies): drop one
			if len(s.m) < maxSessions {
				break
			}
			delete(s.m, k)
		}
	}
	s.m[id] = ss
	return id, ss
}

func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[id]
	if ss == nil || time.Now().After(ss.expires) {
		delete(s.m, id)
		return nil
	}
	return ss
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// open reports whether the console needs no login.
func (c *Console) open() bool { return c.cfg.Tokens.Len() == 0 }

// openOperator is the operator's name in the audit log without tokens.
func (c *Console) openOperator() string {
	if c.cfg.Loopback {
		return "local"
	}
	return "anonymous"
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: "/ui", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// sessionOf returns the request's session. An open console gives a
// browser without one a session of its own (for its CSRF token).
func (c *Console) sessionOf(w http.ResponseWriter, r *http.Request) *session {
	if ck, err := r.Cookie(cookieName); err == nil {
		if ss := c.sessions.get(ck.Value); ss != nil {
			return ss
		}
	}
	if !c.open() {
		return nil
	}
	id, ss := c.sessions.create(c.openOperator())
	c.setCookie(w, r, id, int(c.cfg.SessionTTL/time.Second))
	return ss
}

// authed wraps a page: without a session it sends the browser to the
// login page (script requests get 401); a POST must come from a page of
// the console (same origin) and carry the session's CSRF token.
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		ss := c.sessionOf(w, r)
		if ss != nil {
			c.watch.touch() // an operator looks: keep watching the fleet's results
		}
		if ss == nil {
			if r.Method == http.MethodGet && r.Header.Get(csrfHeader) == "" {
				http.Redirect(w, r, Path+"login", http.StatusSeeOther)
				return
			}
			http.Error(w, "log in to the console first (operator token)", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !httpapi.SameOrigin(r) {
				c.log.Warn("console: cross-origin request refused", "method", r.Method, "path", r.URL.Path, "origin", r.Header.Get("Origin"), "operator", ss.operator)
				http.Error(w, "refused: state-changing requests must come from the console's own pages", http.StatusForbidden)
				return
			}
			tok := r.Header.Get(csrfHeader)
			if tok == "" {
				tok = r.PostFormValue(csrfField)
			}
			if subtle.ConstantTimeCompare([]byte(tok), []byte(ss.csrf)) != 1 {
				c.log.Warn("console: request without its CSRF token refused", "method", r.Method, "path", r.URL.Path, "operator", ss.operator)
				http.Error(w, "refused: the request lacks the page's CSRF token; reload the page", http.StatusForbidden)
				return
			}
		}
		h(w, r, ss)
	})
}

// login serves the login page and takes a token.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if c.open() {
		http.Redirect(w, r, Path, http.StatusSeeOther)
		return
	}
	msg, status := "", http.StatusOK
	if r.Method == http.MethodPost {
		if !httpapi.SameOrigin(r) {
			http.Error(w, "refused: log in from the console's own login page", http.StatusForbidden)
			return
		}
		key := clientKey(r.RemoteAddr)
		if ok, wait, first := c.logins.allow(key); !ok {
			c.throttled(w, r, key, wait, first)
			return
		}
		if op, ok := c.cfg.Tokens.Operator(r.PostFormValue("token")); ok {
			c.logins.succeed(key)
			id, _ := c.sessions.create(op)
			c.setCookie(w, r, id, int(c.cfg.SessionTTL/time.Second))
			c.log.Info("console: operator logged in", "operator", op, "remote", r.RemoteAddr)
			http.Redirect(w, r, Path, http.StatusSeeOther)
			return
		}
		c.logins.fail(key)
		c.log.Warn("console: login with an unknown token refused", "remote", r.RemoteAddr)
		msg, status = "That is not an operator token.", http.StatusUnauthorized
	}
	c.renderStatus(w, status, "login", &view{Title: "Log in", Data: msg})
}

// logout ends the session.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ *session) {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.sessions.end(ck.Value)
	}
	c.setCookie(w, r, "", -1)
	http.Redirect(w, r, Path+"login", http.StatusSeeOther)
}

// throttled answers a login from an address out of tries: 429 with
// Retry-After, logged once per address until it has a try again.
func (c *Console) throttled(w http.ResponseWriter, r *http.Request, key string, wait time.Duration, first bool) {
	secs := int(math.Ceil(wait.Seconds()))
	if first {
		c.log.Warn("console: logins throttled: too many unknown tokens from this address", "remote", r.RemoteAddr, "address", key, "retry_after", strconv.Itoa(secs)+"s")
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	c.renderStatus(w, http.StatusTooManyRequests, "login", &view{Title: "Log in", Data: "Too many unknown tokens from your address: try again in " + strconv.Itoa(secs) + " s."})
}
