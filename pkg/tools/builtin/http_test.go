package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/infra/netguard"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// testServer is an httptest server on 127.0.0.1 that counts the
// connections it accepted and the requests to each path and query.
type testServer struct {
	*httptest.Server
	conns atomic.Int64
	mu    sync.Mutex
	hits  map[string]int
	last  *http.Request
	body  string
}

func newTestServer(t *testing.T, h func(s *testServer, w http.ResponseWriter, r *http.Request)) *testServer {
	t.Helper()
	s := &testServer{hits: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.hits[r.URL.RequestURI()]++
		s.last, s.body = r.Clone(context.Background()), string(body)
		s.mu.Unlock()
		h(s, w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// hit returns how often uri was requested so far, counting this one when
// called from the handler.
func (s *testServer) hit(uri string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[uri]
}

// uris lists the request URIs served so far.
func (s *testServer) uris() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for u := range s.hits {
		out = append(out, u)
	}
	return out
}

func (s *testServer) lastRequest() (*http.Request, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.body
}

func (s *testServer) hostport() string { return strings.TrimPrefix(s.URL, "http://") }

// webHandler is a small web site for http_request.
func webHandler(s *testServer, w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/ok":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Set-Cookie", "session=s3cret")
		w.Header().Set("X-Internal", "not shown")
		_, _ = io.WriteString(w, `{"hello":"world"}`)
	case "/echo":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "%s %s x-test=%s body=%s", r.Method, r.URL.RequestURI(), r.Header.Get("X-Test"), "see server")
	case "/404":
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "no such page:\n\n   /404 — try /ok")
	case "/429":
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, "slow down")
	case "/503":
		w.WriteHeader(http.StatusServiceUnavailable)
	case "/flaky": // 503 on the first request of each query, then 200
		if s.hit(r.URL.RequestURI()) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "recovered")
	case "/limited": // 429 with Retry-After on the first request of each query, then 200
		if s.hit(r.URL.RequestURI()) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, _ = io.WriteString(w, "served after waiting")
	case "/slow":
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	case "/big":
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "5000")
		_, _ = io.WriteString(w, strings.Repeat("é", 2500))
	case "/bin":
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte{0x89, 'P', 'N', 'G', 0xff, 0xfe, 0})
	case "/latin1":
		w.Header().Set("Content-Type", "text/plain; charset=ISO-8859-1")
		_, _ = w.Write([]byte{'c', 'a', 'f', 0xe9})
	case "/empty":
		w.WriteHeader(http.StatusNoContent)
	case "/redirect":
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	default:
		http.NotFound(w, r)
	}
}

// httpTool returns http_request with g (nil: a guard that allows only the
// server s) in a harness.
func httpTool(t *testing.T, s *testServer, cfg builtin.HTTPConfig) *harness {
	t.Helper()
	if cfg.Guard == nil {
		cfg.Guard = &netguard.Guard{AllowHosts: []string{s.hostport()}}
	}
	tool, closer, err := builtin.NewHTTPRequest(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	return newHarness(t, tool)
}

func TestHTTPRequestSuccess(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, webHandler)
	h := httpTool(t, s, builtin.HTTPConfig{})
	ctx := tools.WithCallInfo(context.Background(), tools.CallInfo{Traceparent: testTraceparent})

	out, err := h.callCtx(ctx, "http_request", jsonInput(t, map[string]any{"url": s.URL + "/ok"}))
	if err != nil {
		t.Fatal(err)
	}
	want := "HTTP 200 OK\nContent-Type: application/json\nContent-Length: 17\nETag: \"v1\"\n\n{\"hello\":\"world\"}"
	if out != want {
		t.Errorf("GET /ok =\n%s\nwant\n%s", out, want)
	}
	req, _ := s.lastRequest()
	if got := req.Header.Get("Traceparent"); got != testTraceparent {
		t.Errorf("traceparent sent = %q, want %q", got, testTraceparent)
	}
	if ua := req.Header.Get("User-Agent"); ua != builtin.UserAgentDefault {
		t.Errorf("User-Agent = %q", ua)
	}

	out = h.mustCall("http_request", jsonInput(t, map[string]any{
		"method": "POST", "url": s.URL + "/echo?a=1", "body": `{"k":"v"}`,
		"headers": map[string]string{"X-Test": "yes", "User-Agent": "agent/2"},
	}))
	if !strings.HasSuffix(out, "\n\nPOST /echo?a=1 x-test=yes body=see server") {
		t.Errorf("POST /echo = %q", out)
	}
	req, body := s.lastRequest()
	if body != `{"k":"v"}` || req.Header.Get("User-Agent") != "agent/2" {
		t.Errorf("server got body %q, User-Agent %q", body, req.Header.Get("User-Agent"))
	}

	out = h.mustCall("http_request", jsonInput(t, map[string]any{"method": "HEAD", "url": s.URL + "/ok"}))
	if !strings.HasPrefix(out, "HTTP 200 OK\n") || !strings.HasSuffix(out, "[The response has no body.]") {
		t.Errorf("HEAD /ok = %q", out)
	}
	if out := h.mustCall("http_request", jsonInput(t, map[string]any{"url": s.URL + "/empty"})); !strings.HasPrefix(out, "HTTP 204 No Content") {
		t.Errorf("GET /empty = %q", out)
	}
	out = h.mustCall("http_request", jsonInput(t, map[string]any{"url": s.URL + "/redirect?to=/ok"}))
	if !strings.Contains(out, "Final URL (after redirects): "+s.URL+"/ok\n") || !strings.HasSuffix(out, `{"hello":"world"}`) {
		t.Errorf("redirect = %q", out)
	}
	if out := h.mustCall("http_request", jsonInput(t, map[string]any{"url": s.URL + "/bin"})); !strings.Contains(out, "binary data (image/png") {
		t.Errorf("binary body = %q", out)
	}
	if out := h.mustCall("http_request", jsonInput(t, map[string]any{"url": s.URL + "/latin1"})); !strings.HasSuffix(out, "\n\ncafé") {
		t.Errorf("latin-1 body = %q", out)
	}
	for _, bad := range []string{"s3cret", "Set-Cookie", "X-Internal"} {
		if strings.Contains(out, bad) {
			t.Errorf("output shows %q", bad)
		}
	}
}

func TestHTTPRequestTruncates(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, webHandler)
	const limit = 1000
	h := httpTool(t, s, builtin.HTTPConfig{MaxResponseBytes: limit})
	out := h.mustCall("http_request", jsonInput(t, map[string]any{"url": s.URL + "/big"}))
	if len(out) > limit {
		t.Errorf("content is %d bytes, over the %d limit", len(out), limit)
	}
	head, body, _ := strings.Cut(out, "\n\n")
	if body == "" || strings.Trim(body, "é") != "" {
		t.Errorf("body %q is not a whole-character prefix", body)
	}
	want := fmt.Sprintf("only its first %d bytes are shown below; 4,%03d bytes of 5,000 were left out", len(body), 5000-len(body)-4000)
	if !strings.Contains(head, want) {
		t.Errorf("head %q does not contain %q", head, want)
	}
}

func TestHTTPRequestErrors(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, webHandler)
	h := httpTool(t, s, builtin.HTTPConfig{})

	_, err := h.call("http_request", jsonInput(t, map[string]any{"url": s.URL + "/404"}))
	d := wantErr(t, "http_request", err, permanent, "http_404", "HTTP 404",
		`the response body began with: "no such page: /404 — try /ok"`)
	if d.Retryable {
		t.Error("404 retryable")
	}
	if _, ok := errors.AsType[*classify.HTTPError](err); !ok {
		t.Errorf("404: %v is not a *classify.HTTPError", err)
	}

	_, err = h.call("http_request", jsonInput(t, map[string]any{"url": s.URL + "/429"}))
	d = wantErr(t, "http_request", err, transient, classify.CodeHTTP429, "rate limited")
	if !d.Retryable || d.RetryAfter != 7*time.Second {
		t.Errorf("429: retryable %v, retry after %v; want true, 7s", d.Retryable, d.RetryAfter)
	}
	_, err = h.call("http_request", jsonInput(t, map[string]any{"url": s.URL + "/503"}))
	wantErr(t, "http_request", err, transient, "http_503", "HTTP 503")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = h.callCtx(ctx, "http_request", jsonInput(t, map[string]any{"url": s.URL + "/slow"}))
	wantErr(t, "http_request", err, transient, classify.CodeTimeout)

	invalid := []struct{ input, field string }{
		{`{"url": "ftp://example.com/x"}`, "url"},
		{`{"url": "file:///etc/passwd"}`, "url"},
		{`{"url": "example.com/x"}`, "url"},
		{`{"url": "http://"}`, "url"},
		{`{"url": "http://[::1"}`, "url"},
		{`{"url": "   "}`, "url"},
		{`{"method": "TRACE", "url": "http://example.com"}`, "method"},
		{`{"url": "http://example.com", "headers": {"Host": "internal"}}`, "headers.Host"},
		{`{"url": "http://example.com", "headers": {"X-A": "a\r\nInjected: 1"}}`, "headers.X-A"},
		{`{"url": "http://example.com", "headers": {"bad name": "x"}}`, `headers["bad name"]`},
		{`{"url": "http://example.com", "headers": {"X-N": 1}}`, "headers.X-N"},
	}
	for _, tc := range invalid {
		_, err := h.call("http_request", tc.input)
		d := wantErr(t, "http_request", err, validation, classify.CodeInvalidArgument, tc.field)
		if len(d.Fields) == 0 || d.Fields[0].Path != tc.field {
			t.Errorf("%s: fields %v, want %s", tc.input, d.Fields, tc.field)
		}
	}
	// The invalid calls sent nothing.
	for _, uri := range s.uris() {
		switch uri {
		case "/404", "/429", "/503", "/slow":
		default:
			t.Errorf("unexpected request %s", uri)
		}
	}
}

// TestHTTPRequestGuard: the test server on 127.0.0.1 is refused unless
// allow-listed, in every form of its address, and redirects cannot lead to
// a loopback service that is not allowed. No refused request connects.
func TestHTTPRequestGuard(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, webHandler)
	other := newTestServer(t, webHandler) // never to be reached
	_, port, _ := net.SplitHostPort(s.hostport())
	_, otherPort, _ := net.SplitHostPort(other.hostport())
	res := &mapResolver{m: map[string][]netip.Addr{
		"intranet.test": {netip.MustParseAddr("127.0.0.1")},
		"localhost":     {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
	}}

	closed := httpTool(t, s, builtin.HTTPConfig{Guard: &netguard.Guard{Resolver: res}})
	refused := []struct{ url, host string }{
		{s.URL + "/ok", "127.0.0.1"},
		{"http://localhost:" + port + "/ok", "localhost"},
		{"http://intranet.test:" + port + "/ok", "intranet.test"},
		{"http://[::1]:" + port + "/ok", "::1"},
		{"http://[::ffff:127.0.0.1]:" + port + "/ok", "::ffff:127.0.0.1"},
		{"http://0.0.0.0:" + port + "/ok", "0.0.0.0"},
	}
	for _, tc := range refused {
		_, err := closed.call("http_request", jsonInput(t, map[string]any{"url": tc.url}))
		wantErr(t, "http_request", err, permanent, "",
			"the address of "+tc.host+" is not allowed (private/loopback network)")
	}

	// Allow-listed by host and port, the same server works; redirects from
	// it to loopback services that are not allowed are refused.
	open := httpTool(t, s, builtin.HTTPConfig{Guard: &netguard.Guard{AllowHosts: []string{s.hostport()}, Resolver: res}})
	open.mustCall("http_request", jsonInput(t, map[string]any{"url": s.URL + "/ok"}))
	for _, to := range []string{
		other.URL + "/ok",
		"http://localhost:" + otherPort + "/ok",
		"http://intranet.test:" + otherPort + "/ok",
		"http://intranet.test:" + port + "/ok", // the allowed server, under a name that is not allowed
		"http://[::1]:" + otherPort + "/ok",
	} {
		_, err := open.call("http_request", jsonInput(t, map[string]any{"url": s.URL + "/redirect?to=" + url.QueryEscape(to)}))
		wantErr(t, "http_request", err, permanent, "", "is not allowed (private/loopback network)")
	}
	if n := other.conns.Load(); n != 0 {
		t.Errorf("the server that is not allowed accepted %d connections", n)
	}
	// The http.Server accepts connections one after another and counts each
	// before accepting the next: the allowed requests are all it saw.
	if got := s.hit("/ok"); got != 1 {
		t.Errorf("the allowed server served /ok %d times, want 1 (the allow-listed call)", got)
	}

	cidr := httpTool(t, s, builtin.HTTPConfig{Guard: &netguard.Guard{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}})
	cidr.mustCall("http_request", jsonInput(t, map[string]any{"url": s.URL + "/ok"}))
}

// mapResolver resolves names from a map; others do not exist.
type mapResolver struct{ m map[string][]netip.Addr }

func (r *mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r.m[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func TestHTTPRequestDNSNotFound(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, webHandler)
	h := httpTool(t, s, builtin.HTTPConfig{Guard: &netguard.Guard{Resolver: &mapResolver{}}})
	_, err := h.call("http_request", `{"url": "https://no-such-host.test/"}`)
	wantErr(t, "http_request", err, permanent, classify.CodeDNSNotFound, "does not exist")
}

func TestHTTPRequestDefinition(t *testing.T) {
	t.Parallel()
	tool, closer, err := builtin.NewHTTPRequest(builtin.HTTPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if tool.Name != "http_request" || tool.Timeout != builtin.HTTPTimeout || tool.Idempotent {
		t.Errorf("tool %s timeout %v idempotent %v", tool.Name, tool.Timeout, tool.Idempotent)
	}
	for _, w := range []string{"http://", "private", "Redirects"} {
		if !strings.Contains(tool.Description, w) {
			t.Errorf("description does not mention %q: %s", w, tool.Description)
		}
	}
	if _, _, err := builtin.NewHTTPRequest(builtin.HTTPConfig{MaxResponseBytes: -1}); err == nil {
		t.Error("negative MaxResponseBytes accepted")
	}
}
