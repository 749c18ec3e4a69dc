package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// secret is the value of the header the catalog takes from the environment.
const secret = "sk-live-7f3a9c1e5b2d"

// webhookEntry is the YAML of a webhook tool posting to url.
func webhookEntry(name, url, settings string) string {
	return fmt.Sprintf(`  - name: %s
    description: A webhook tool.
    input_schema: {type: object}
%s    backend: webhook
    webhook:
      url: %s
      headers:
        Authorization: Bearer ${API_TOKEN}
        X-Static: plain
      max_output_bytes: 2000
`, name, settings, url)
}

var webhookEnv = env("API_TOKEN", secret)

// request is what the test server saw of one request.
type request struct {
	header http.Header
	body   string
}

// server is a test endpoint answering with the handlers in turn (the last
// one for every later request) and recording the requests.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
}

func newServer(t *testing.T, handlers ...http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	var n atomic.Int64
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests = append(s.requests, request{header: r.Header.Clone(), body: string(body)})
		s.mu.Unlock()
		i := min(int(n.Add(1))-1, len(handlers)-1)
		handlers[i](w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) seen() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.requests...)
}

func status(code int, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "status %d", code)
	}
}

func TestWebhookSuccess(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "12 °C, light rain")
	})
	ts := loadTools(t, Options{LookupEnv: webhookEnv}, webhookEntry("weather", srv.URL+"/now", ""))
	ctx := tools.WithCallInfo(t.Context(), tools.CallInfo{
		ID: "toolu_01", Tool: "weather", Attempt: 2, Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	})
	out, err := ts["weather"].Handler(ctx, json.RawMessage(`{"city":"Lisbon"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Content.Text(); got != "12 °C, light rain" {
		t.Errorf("content %q", got)
	}
	reqs := srv.seen()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	for name, want := range map[string]string{
		"Authorization":    "Bearer " + secret,
		"X-Static":         "plain",
		"Content-Type":     "application/json",
		"Traceparent":      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"Toolpool-Call-Id": "toolu_01",
		"Toolpool-Attempt": "2",
		"Toolpool-Tool":    "weather",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	if r.body != `{"city":"Lisbon"}` {
		t.Errorf("body %q", r.body)
	}
}

func TestWebhookStatuses(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		handler    http.HandlerFunc
		class      envelope.Class
		code       string
		retryAfter time.Duration
	}{
		{"404", status(404), envelope.ClassPermanent, "http_404", 0},
		{"400", status(400), envelope.ClassPermanent, "http_400", 0},
		{"429 with Retry-After", status(429, "Retry-After", "7"), envelope.ClassTransient, classify.CodeHTTP429, 7 * time.Second},
		{"503", status(503), envelope.ClassTransient, "http_503", 0},
		{"redirect is not followed", status(302, "Location", "http://127.0.0.1:1/elsewhere"), envelope.ClassPermanent, "http_302", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, tc.handler)
			ts := loadTools(t, Options{LookupEnv: webhookEnv}, webhookEntry("w", srv.URL, ""))
			_, err := ts["w"].Handler(t.Context(), json.RawMessage(`{}`))
			d := classify.Classify(err)
			if d.Class != tc.class || d.Code != tc.code || d.RetryAfter != tc.retryAfter {
				t.Errorf("got %s/%s retry after %v, want %s/%s %v (err %v)", d.Class, d.Code, d.RetryAfter, tc.class, tc.code, tc.retryAfter, err)
			}
			if n := len(srv.seen()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestWebhookTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	ts := loadTools(t, Options{LookupEnv: webhookEnv}, webhookEntry("slow", srv.URL, "    timeout: 200ms\n    retry: {max_attempts: 1}\n"))
	ctx, cancel := context.WithTimeoutCause(t.Context(), 200*time.Millisecond, &classify.TimeoutError{After: 200 * time.Millisecond})
	defer cancel()
	_, err := ts["slow"].Handler(ctx, json.RawMessage(`{}`))
	if d := classify.Classify(err); d.Code != classify.CodeTimeout || d.Class != envelope.ClassTransient {
		t.Fatalf("slow server: %s/%s (%v)", d.Class, d.Code, err)
	}

	// Through the pool: the worker's per-attempt timeout ends the request.
	p := startPool(t, ts["slow"])
	res := p.call(t, "slow", `{}`)
	if !res.IsError || res.Code != classify.CodeTimeout || !strings.HasPrefix(res.Content.Text(), "The tool slow did not answer within 200ms.") {
		t.Errorf("result %+v %q", res, res.Content.Text())
	}
}

// TestWebhookRetriedThroughThePool: 503, then 200: JetStream redelivers the
// call after the backoff and the second attempt succeeds. The endpoint sees
// the same call id twice and the attempt number.
func TestWebhookRetriedThroughThePool(t *testing.T) {
	t.Parallel()
	srv := newServer(t, status(503), func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "sunny") })
	ts := loadTools(t, Options{LookupEnv: webhookEnv},
		webhookEntry("weather", srv.URL, "    retry: {max_attempts: 3, base_delay: 50ms, max_delay: 100ms}\n"))
	p := startPool(t, ts["weather"])
	res := p.call(t, "weather", `{"city":"Porto"}`)
	if res.IsError || res.Content.Text() != "sunny" || res.Attempts != 2 {
		t.Fatalf("result: is_error %v attempts %d %q", res.IsError, res.Attempts, res.Content.Text())
	}
	reqs := srv.seen()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	id := reqs[0].header.Get(HeaderCallID)
	if id == "" || reqs[1].header.Get(HeaderCallID) != id {
		t.Errorf("call ids %q and %q: want the same, non-empty", id, reqs[1].header.Get(HeaderCallID))
	}
	if reqs[0].header.Get(HeaderAttempt) != "1" || reqs[1].header.Get(HeaderAttempt) != "2" {
		t.Errorf("attempt headers %q, %q", reqs[0].header.Get(HeaderAttempt), reqs[1].header.Get(HeaderAttempt))
	}
	if tp := reqs[0].header.Get(envelope.HeaderTraceparent); len(tp) != 55 || !strings.HasPrefix(tp, "00-") {
		t.Errorf("traceparent %q", tp)
	}

	// 429 with Retry-After, then 200: retried too (Retry-After is capped by
	// max_delay).
	srv2 := newServer(t, status(429, "Retry-After", "1"), func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	ts2 := loadTools(t, Options{LookupEnv: webhookEnv},
		webhookEntry("limited", srv2.URL, "    retry: {max_attempts: 3, base_delay: 50ms, max_delay: 100ms}\n"))
	p2 := startPool(t, ts2["limited"])
	if res := p2.call(t, "limited", `{}`); res.IsError || res.Attempts != 2 {
		t.Errorf("429 then 200: %+v", res)
	}

	// 404 is answered at once.
	srv3 := newServer(t, status(404))
	ts3 := loadTools(t, Options{LookupEnv: webhookEnv}, webhookEntry("missing", srv3.URL, ""))
	p3 := startPool(t, ts3["missing"])
	if res := p3.call(t, "missing", `{}`); !res.IsError || res.Class != envelope.ClassPermanent || res.Attempts != 1 || len(srv3.seen()) != 1 {
		t.Errorf("404: %+v", res)
	}
}

// TestWebhookSecretNeverLeaks: an endpoint that echoes the request headers
// back, in a success and in an error, and a transport failure: the secret
// reaches no content, no error message and no log line.
func TestWebhookSecretNeverLeaks(t *testing.T) {
	t.Parallel()
	echoHeaders := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			_ = r.Header.Write(w)
		}
	}
	ok := newServer(t, echoHeaders(200))
	failing := newServer(t, echoHeaders(500))
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	var logs natstest.LockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ts := loadTools(t, Options{LookupEnv: webhookEnv},
		webhookEntry("echo_ok", ok.URL, ""),
		webhookEntry("echo_fail", failing.URL, "    retry: {max_attempts: 2, base_delay: 10ms, max_delay: 20ms}\n"),
		webhookEntry("refused", closedURL, "    retry: {max_attempts: 2, base_delay: 10ms, max_delay: 20ms}\n"),
	)

	// Direct calls: content and errors.
	out, err := ts["echo_ok"].Handler(t.Context(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if text := out.Content.Text(); strings.Contains(text, secret) || !strings.Contains(text, "Bearer "+redacted) {
		t.Errorf("content %q", text)
	}
	for _, name := range []string{"echo_fail", "refused"} {
		_, err := ts[name].Handler(t.Context(), json.RawMessage(`{}`))
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		d := classify.Classify(err)
		for _, s := range []string{err.Error(), fmt.Sprintf("%+v", err), d.Cause, d.Hint, d.Message(classify.MessageInput{Tool: name})} {
			if strings.Contains(s, secret) {
				t.Errorf("%s: the secret is in %q", name, s)
			}
		}
	}

	// Through the pool, with every log line kept.
	p := startPoolLogging(t, log, ts["echo_ok"], ts["echo_fail"], ts["refused"])
	for _, name := range []string{"echo_ok", "echo_fail", "refused"} {
		res := p.call(t, name, `{}`)
		data, err := envelope.EncodeResult(&res)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("%s: the result holds the secret: %s", name, data)
		}
		if name != "echo_ok" && !res.IsError {
			t.Errorf("%s: not an error: %s", name, data)
		}
	}
	got := logs.String()
	if got == "" {
		t.Error("no logs captured")
	}
	if strings.Contains(got, secret) {
		t.Errorf("the logs hold the secret:\n%s", got)
	}
}

func TestWebhookOutputCap(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("é", 50_000) // 100,000 bytes
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) })
	ts := loadTools(t, Options{LookupEnv: webhookEnv}, webhookEntry("big", srv.URL, ""))
	out, err := ts["big"].Handler(t.Context(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	text := out.Content.Text()
	if want := envelope.Truncate(body, 2000); text != want {
		t.Errorf("content (%d bytes) ends %q, want the envelope's truncation %q", len(text), tail(text), tail(want))
	}
}

// TestWebhookGuard: the webhook's own host is allowed, but the client does
// not reach other loopback addresses (a redirect is not followed, and a
// request built for another host is refused by the guard).
func TestWebhookGuard(t *testing.T) {
	t.Parallel()
	other := newServer(t, status(200))
	e := &Entry{Name: "w", Webhook: &WebhookConfig{URL: "http://127.0.0.1:1/"}}
	client := defaultHTTPClient(e)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, other.URL, nil)
	_, err := client.Do(req)
	if err == nil {
		t.Fatal("the client reached a loopback host that is not the webhook's")
	}
	if d := classify.Classify(err); d.Class != envelope.ClassPermanent || !strings.Contains(d.Cause, "not allowed") {
		t.Errorf("refusal: %+v", d)
	}
	if len(other.seen()) != 0 {
		t.Error("the other server got a request")
	}
}

func tail(s string) string {
	if len(s) > 120 {
		return "…" + s[len(s)-120:]
	}
	return s
}
