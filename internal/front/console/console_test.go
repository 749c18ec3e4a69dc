package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/front/console"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/jetstream"
)

const aliceToken = "alice-operator-token-0123456789"

type bundle struct {
	c   *console.Console
	srv *httptest.Server
	js  js.JetStream
	log *natstest.LockedBuffer
}

// setup serves a console with operator alice on a real embedded server,
// with echo's consumer in place; opts change its Config.
func setup(t *testing.T, opts ...func(*console.Config)) *bundle {
	t.Helper()
	_, nc, j := natstest.StartProvisioned(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := jetstream.EnsureConsumer(ctx, j, jetstream.ConsumerSpec{Tool: "echo"}); err != nil {
		t.Fatal(err)
	}
	tokens, err := console.ParseTokens([]byte("alice: "+aliceToken), "tokens")
	if err != nil {
		t.Fatal(err)
	}
	logs := &natstest.LockedBuffer{}
	cfg := console.Config{Conn: nc, JetStream: j, Tokens: tokens, Loopback: true,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return &bundle{c: c, srv: newServer(t, c), js: j, log: logs}
}

// newServer serves c's handler on loopback until the test ends.
func newServer(t *testing.T, c *console.Console) *httptest.Server {
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// client is a browser-like client: a cookie jar, no redirects followed.
func client(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Jar: jar, Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (b *bundle) post(t *testing.T, c *http.Client, path string, form url.Values, origin string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func (b *bundle) get(t *testing.T, c *http.Client, path string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(b.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func (b *bundle) paused(t *testing.T) bool {
	t.Helper()
	c, err := b.js.Consumer(context.Background(), jetstream.StreamCalls, jetstream.ConsumerName("echo"))
	if err != nil {
		t.Fatal(err)
	}
	return c.CachedInfo().Paused
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf" content="([0-9a-f]+)">`)

// Without a login every page sends the browser to the login page; the
// login sets an HttpOnly, SameSite=Strict cookie; a POST needs the same
// origin and the session's CSRF token; a pause is logged with the
// operator's name.
func TestAccess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := client(t)
	self := b.srv.URL

	for _, path := range []string{"/ui/", "/ui/dlq", "/ui/dlq/1", "/ui/tools/echo", "/ui/tail"} {
		if resp, _ := b.get(t, c, path); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
			t.Errorf("GET %s without a login: %d %s, want 303 to /ui/login", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if resp := b.post(t, c, "/ui/tools/echo/pause", nil, self); resp.StatusCode != http.StatusUnauthorized || b.paused(t) {
		t.Errorf("POST pause without a login: %d, paused %v", resp.StatusCode, b.paused(t))
	}
	if resp := b.post(t, c, "/ui/login", url.Values{"token": {"not-a-token-0123456789"}}, self); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with a wrong token: %d, want 401", resp.StatusCode)
	}
	if resp := b.post(t, c, "/ui/login", url.Values{"token": {aliceToken}}, "http://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("login from another origin: %d, want 403", resp.StatusCode)
	}
	resp := b.post(t, c, "/ui/login", url.Values{"token": {aliceToken}}, self)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	ck := resp.Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Path != "/ui" {
		t.Fatalf("session cookie %+v, want one, HttpOnly, SameSite=Strict, Path /ui", ck)
	}
	_, page := b.get(t, c, "/ui/")
	m := csrfMeta.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the overview has no CSRF token:\n%s", page)
	}
	csrf := m[1]

	for _, tc := range []struct {
		name   string
		form   url.Values
		origin string
	}{
		{"no origin", url.Values{"csrf": {csrf}}, ""},
		{"another origin", url.Values{"csrf": {csrf}}, "http://evil.example"},
		{"no csrf token", nil, self},
		{"a wrong csrf token", url.Values{"csrf": {strings.Repeat("0", len(csrf))}}, self},
	} {
		if resp := b.post(t, c, "/ui/tools/echo/pause", tc.form, tc.origin); resp.StatusCode != http.StatusForbidden || b.paused(t) {
			t.Errorf("pause with %s: %d, paused %v; want 403 and not paused", tc.name, resp.StatusCode, b.paused(t))
		}
	}
	if resp := b.post(t, c, "/ui/tools/echo/pause", url.Values{"csrf": {csrf}}, self); resp.StatusCode != http.StatusSeeOther || !b.paused(t) {
		t.Fatalf("pause from the page: %d, paused %v", resp.StatusCode, b.paused(t))
	}
	if resp := b.post(t, c, "/ui/tools/echo/resume", url.Values{"csrf": {csrf}}, self); resp.StatusCode != http.StatusSeeOther || b.paused(t) {
		t.Fatalf("resume from the page: %d, paused %v", resp.StatusCode, b.paused(t))
	}
	// A {tool} that is not a tool name never reaches a page or a pause.
	for _, path := range []string{"/ui/tools/a%2F..%2Fdlq", "/ui/tools/a.b", "/ui/tools/a%20b/frag"} {
		if resp, _ := b.get(t, c, path); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
	if resp := b.post(t, c, "/ui/tools/e.cho/pause", url.Values{"csrf": {csrf}}, self); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST pause of a name that is not a tool's: %d, want 404", resp.StatusCode)
	}
	logs := b.log.String()
	for _, want := range []string{`msg="console: tool paused fleet-wide" component=console operator=alice tool=echo`, `msg="console: tool resumed fleet-wide" component=console operator=alice tool=echo`} {
		if !strings.Contains(logs, want) {
			t.Errorf("audit log lacks %q:\n%s", want, logs)
		}
	}
	// A purge without the typed confirmation is refused before anything.
	req, _ := http.NewRequest(http.MethodPost, self+"/ui/dlq/purge", strings.NewReader("seq=1&confirm=yes"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", self)
	req.Header.Set("X-Toolpool-Csrf", csrf)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("purge without confirmation: %d, want 400", resp.StatusCode)
	}

	if resp := b.post(t, c, "/ui/logout", url.Values{"csrf": {csrf}}, self); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("logout: %d", resp.StatusCode)
	}
	if resp, _ := b.get(t, c, "/ui/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /ui/ after logout: %d, want 303 to the login", resp.StatusCode)
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"alice: short", "alice: " + aliceToken + "\nbob: " + aliceToken, "[a, b]", `"two words": ` + aliceToken} {
		if _, err := console.ParseTokens([]byte(bad), "f"); err == nil {
			t.Errorf("ParseTokens(%q) took it", bad)
		}
	}
	env := map[string]string{console.EnvTokens: "bob=" + aliceToken + "x, carol=" + aliceToken + "y"}
	tk, err := console.LoadTokens("", func(k string) string { return env[k] })
	if err != nil || strings.Join(tk.Names(), ",") != "bob,carol" {
		t.Fatalf("LoadTokens from the environment: %v, %v", tk.Names(), err)
	}
	if op, ok := tk.Operator(aliceToken + "y"); !ok || op != "carol" {
		t.Errorf("Operator = %q, %v", op, ok)
	}
	if _, ok := tk.Operator(aliceToken); ok {
		t.Error("a token that is no one's names an operator")
	}
	env[console.EnvTokens] = "bob"
	if _, err := console.LoadTokens("", func(k string) string { return env[k] }); err == nil {
		t.Error("LoadTokens took a pair without =")
	}
}

// Without tokens the console is open only on a loopback address, or when
// told so.
func TestConfigNeedsTokensOffLoopback(t *testing.T) {
	t.Parallel()
	_, nc, j := natstest.StartProvisioned(t)
	if _, err := console.New(console.Config{Conn: nc, JetStream: j}); err == nil || !strings.Contains(err.Error(), "Config.Tokens") {
		t.Errorf("New off loopback without tokens: %v", err)
	}
	for _, cfg := range []console.Config{{Conn: nc, JetStream: j, Loopback: true}, {Conn: nc, JetStream: j, InsecureNoAuth: true}} {
		if _, err := console.New(cfg); err != nil {
			t.Errorf("New(%+v): %v", cfg, err)
		}
	}
}
