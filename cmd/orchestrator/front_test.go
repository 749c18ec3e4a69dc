package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
)

// httpDo sends one request to a serve under test; hdr sets headers
// ("Host" sets the Host).
func httpDo(t *testing.T, method, url, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data
}

// waitTools waits until the in-process worker's tools are live; a timeout
// logs what GET /v1/tools answered last.
func waitTools(t *testing.T, base string, hdr ...string) {
	t.Helper()
	var body []byte
	live := func() bool { return bytes.Contains(body, []byte(`"echo"`)) }
	defer func() {
		if !live() {
			t.Logf("GET /v1/tools: %s", body)
		}
	}()
	natstest.Eventually(t, time.Minute, "the demo tools to become live", func() bool {
		_, _, body = httpDo(t, "GET", base+"/v1/tools", "", hdr...)
		return live()
	})
}

const echoTurn = `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_front_1","name":"echo","input":{"text":"ran"}}]}`

// No web page can run tools through a local serve: a browser's
// cross-origin request, a body that is not JSON (what a page sends without
// a preflight) and a Host that is not loopback (DNS rebinding) are refused
// (issue 12, finding 7). Bad ids, and a body of one API with ?format=
// naming another, are refused with 400 (findings 10, 11).
func TestServeRefusesWhatItShouldNotRun(t *testing.T) {
	t.Parallel()
	base := startServe(t)
	waitTools(t, base)
	port := strings.TrimPrefix(base, "http://127.0.0.1:")
	cases := []struct {
		name   string
		body   string
		hdr    []string
		status int
		want   string
	}{
		{"a page's simple POST", echoTurn, []string{"Content-Type", "text/plain", "Origin", "http://evil.example"}, 403, "http://evil.example"},
		{"text/plain", echoTurn, []string{"Content-Type", "text/plain"}, 415, "application/json"},
		{"no content type", echoTurn, nil, 415, "application/json"},
		{"form", echoTurn, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "application/json"},
		{"cross-origin JSON", echoTurn, []string{"Content-Type", "application/json", "Origin", "http://evil.example"}, 403, "refused"},
		{"origin null", echoTurn, []string{"Content-Type", "application/json", "Origin", "null"}, 403, "refused"},
		{"cross-site fetch", echoTurn, []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}, 403, "cross-site"},
		{"rebound host", echoTurn, []string{"Content-Type", "application/json", "Host", "evil.example:" + port}, 403, "host name"},
		{"rebound host, same origin", echoTurn, []string{"Content-Type", "application/json", "Host", "evil.example:" + port, "Origin", "http://evil.example:" + port}, 403, "host name"},
		{"localhost", echoTurn, []string{"Content-Type", "application/json", "Host", "localhost:" + port}, 200, "ran"},
		{"a long id", `{"role":"assistant","content":[{"type":"tool_use","id":"` + strings.Repeat("i", 100_000) + `","name":"echo","input":{"text":"x"}}]}`,
			[]string{"Content-Type", "application/json"}, 400, "content[0].id: is 100000 bytes"},
		{"a long session", echoTurn, []string{"Content-Type", "application/json", "Toolpool-Session", strings.Repeat("s", 5000)}, 400, "Toolpool-Session header is 5000 bytes"},
		{"responses items as chat", `[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"echo","arguments":"{\"text\":\"x\"}"}]`,
			[]string{"Content-Type", "application/json"}, 400, "the body looks like OpenAI Responses API output"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, q := range []string{"", "?format=openai"} {
				if (c.name == "responses items as chat") != (q != "") {
					continue
				}
				status, _, body := httpDo(t, "POST", base+"/v1/tool_calls"+q, c.body, c.hdr...)
				if status != c.status || !bytes.Contains(body, []byte(c.want)) {
					t.Errorf("%s: status %d body %.300s; want %d and %q", q, status, body, c.status, c.want)
				}
			}
		})
	}
	// Health probes from a rebound page are refused too; from loopback they answer.
	if status, _, _ := httpDo(t, "GET", base+"/metrics", "", "Host", "evil.example"); status != 403 {
		t.Errorf("/metrics with a foreign Host: %d", status)
	}
	if status, _, _ := httpDo(t, "GET", base+"/healthz", ""); status != 200 {
		t.Errorf("/healthz: %d", status)
	}
}

// The pages of an origin given with --http-allowed-origins may call the
// API: their preflight is answered and the answers carry CORS headers.
func TestServeAllowedOrigins(t *testing.T) {
	t.Parallel()
	base := startServe(t, "--http-allowed-origins", "http://app.example, https://other.example:8443")
	waitTools(t, base)
	status, hdr, _ := httpDo(t, "OPTIONS", base+"/v1/tool_calls", "", "Origin", "http://app.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	if status != 204 || !strings.Contains(hdr.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", status, hdr)
	}
	// An async call's headers and its DELETE, and /mcp's headers.
	status, hdr, _ = httpDo(t, "OPTIONS", base+"/v1/tool_calls/x", "", "Origin", "http://app.example",
		"Access-Control-Request-Method", "DELETE", "Access-Control-Request-Headers", "prefer, toolpool-priority, mcp-session-id")
	for _, want := range []string{"Prefer", "Toolpool-Priority", "Mcp-Session-Id", "Mcp-Protocol-Version"} {
		if status != 204 || !strings.Contains(hdr.Get("Access-Control-Allow-Headers"), want) {
			t.Errorf("preflight for %s: %d %v", want, status, hdr)
		}
	}
	if !strings.Contains(hdr.Get("Access-Control-Allow-Methods"), "DELETE") {
		t.Errorf("preflight of DELETE: %v", hdr)
	}
	for _, want := range []string{"Location", "Preference-Applied", "Mcp-Session-Id"} {
		if !strings.Contains(hdr.Get("Access-Control-Expose-Headers"), want) {
			t.Errorf("exposed headers lack %s: %v", want, hdr)
		}
	}
	status, hdr, body := httpDo(t, "POST", base+"/v1/tool_calls", echoTurn,
		"Content-Type", "application/json; charset=utf-8", "Origin", "http://app.example")
	if status != 200 || !bytes.Contains(body, []byte("ran")) || hdr.Get("Access-Control-Allow-Origin") != "http://app.example" {
		t.Errorf("allowed origin: %d %v %s", status, hdr, body)
	}
	if status, _, _ := httpDo(t, "POST", base+"/v1/tool_calls", echoTurn, "Content-Type", "application/json", "Origin", "http://app.example:81"); status != 403 {
		t.Errorf("another port of an allowed origin: %d, want 403", status)
	}
}

// writeKeys writes an API key file.
func writeKeys(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	keyA = "key-a-0123456789abcdef"
	keyB = "key-b-0123456789abcdef"
)

// With API keys every API request needs one; a key limited to some tools
// lists and calls only those, and a call to another is answered as if the
// tool did not exist, naming none of the others (issue 12, finding 7).
func TestServeAPIKeys(t *testing.T) {
	t.Parallel()
	// key-b's SHA-256 only, so the file holds no secret for it.
	keys := writeKeys(t, `keys:
  - tenant: team-a
    key: `+keyA+`
  - tenant: team-b
    sha256: 144d99070d778f273bc8cf0e19d169981464450a25810a3655a6d000f3d0a702
    tools: [echo]
`)
	base := startServe(t, "--api-keys", keys)
	waitTools(t, base, "Authorization", "Bearer "+keyA)
	json := []string{"Content-Type", "application/json"}

	for _, auth := range []string{"", "Bearer nope-nope-nope-nope", "Basic " + keyA, keyA} {
		status, hdr, body := httpDo(t, "POST", base+"/v1/tool_calls", echoTurn, append(json, "Authorization", auth)...)
		if status != 401 || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: status %d %s; want 401 with WWW-Authenticate", auth, status, body)
		}
		if status, _, _ := httpDo(t, "GET", base+"/v1/tools", "", "Authorization", auth); status != 401 {
			t.Errorf("GET /v1/tools with Authorization %q: %d", auth, status)
		}
	}
	_, _, body := httpDo(t, "GET", base+"/v1/tools", "", "Authorization", "Bearer "+keyB)
	if !bytes.Contains(body, []byte(`"echo"`)) || bytes.Contains(body, []byte(`"sleep"`)) || bytes.Contains(body, []byte(`"flaky"`)) {
		t.Errorf("team-b's tools: %s", body)
	}
	turn := `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_k1","name":"echo","input":{"text":"b ran"}},{"type":"tool_use","id":"toolu_k2","name":"sleep","input":{"ms":1}}]}`
	status, hdr, body := httpDo(t, "POST", base+"/v1/tool_calls", turn, append(json, "Authorization", "Bearer "+keyB)...)
	if status != 200 || !bytes.Contains(body, []byte("b ran")) || hdr.Get("Toolpool-Error-Indexes") != "1" {
		t.Fatalf("team-b's turn: %d %v %s", status, hdr, body)
	}
	if !bytes.Contains(body, []byte("There is no tool named sleep. Available tools: echo.")) {
		t.Errorf("team-b's call to sleep: %s", body)
	}
	if bytes.Contains(body, []byte("flaky")) || bytes.Contains(body, []byte("read_file")) {
		t.Errorf("team-b's error names other tools: %s", body)
	}
	status, _, body = httpDo(t, "POST", base+"/v1/tool_calls", turn, append(json, "Authorization", "Bearer "+keyA)...)
	if status != 200 || bytes.Contains(body, []byte(`"is_error"`)) {
		t.Errorf("team-a's turn: %d %s", status, body)
	}
	// Probes and, on loopback, the metrics need no key; the tenants' calls are counted.
	if status, _, _ := httpDo(t, "GET", base+"/readyz", ""); status != 200 {
		t.Errorf("/readyz without a key: %d", status)
	}
	status, _, body = httpDo(t, "GET", base+"/metrics", "")
	if status != 200 || !bytes.Contains(body, []byte(`toolpool_tenant_tool_calls_total{outcome="not_allowed",tenant="team-b"} 1`)) ||
		!bytes.Contains(body, []byte(`toolpool_tenant_tool_calls_total{outcome="dispatched",tenant="team-a"} 2`)) {
		t.Errorf("/metrics: %d\n%s", status, grepLines(body, "toolpool_tenant"))
	}
}

func grepLines(data []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// serve refuses a non-loopback HTTP address without API keys, unless told
// so explicitly (issue 12, finding 7).
func TestServeRefusesAnOpenNonLoopbackAddress(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	code := run(ctx, []string{"serve", "--http", "0.0.0.0:0", "--data-dir", filepath.Join(tmp, "data"), "--nats-listen", "127.0.0.1:0",
		"--workspace", filepath.Join(tmp, "ws")}, &stderr, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--http-insecure-no-auth") || !strings.Contains(stderr.String(), "--api-keys") {
		t.Fatalf("exit %d, stderr %q; want 2 and a message naming --api-keys and --http-insecure-no-auth", code, stderr.String())
	}
	for _, args := range [][]string{
		{"--http", "0.0.0.0:8080", "--http-insecure-no-auth", "--ui-insecure-no-auth"},
		{"--http", ":8080", "--api-keys", writeKeys(t, `[{"tenant":"t","key":"`+keyA+`"}]`), "--ui-tokens", writeUITokens(t, "alice: "+keyA)},
		{"--http", "[::1]:8080"},
		{"--http", "localhost:8080"},
	} {
		if _, err := parseServe(args, io.Discard); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// serve refuses a non-loopback HTTP address whose console at /ui would be
// open: operator tokens, or --ui-insecure-no-auth, are required there.
func TestServeRefusesAnOpenConsole(t *testing.T) {
	t.Parallel()
	keys := writeKeys(t, `[{"tenant":"t","key":"`+keyA+`"}]`)
	_, err := parseServe([]string{"--http", "0.0.0.0:8080", "--api-keys", keys}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--ui-tokens") || !strings.Contains(err.Error(), "--ui-insecure-no-auth") {
		t.Fatalf("serve with an open console on 0.0.0.0: %v; want a refusal naming --ui-tokens and --ui-insecure-no-auth", err)
	}
	if _, err := parseServe([]string{"--http", "0.0.0.0:8080", "--api-keys", keys, "--ui-tokens", writeUITokens(t, "alice: short")}, io.Discard); err == nil {
		t.Error("serve took an operator token of 5 characters")
	}
	for _, args := range [][]string{
		{"--http", "0.0.0.0:8080", "--api-keys", keys, "--ui-insecure-no-auth"},
		{"--http", "0.0.0.0:8080", "--api-keys", keys, "--ui-tokens", writeUITokens(t, "alice: "+keyA)},
	} {
		if _, err := parseServe(args, io.Discard); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// writeUITokens writes an operator tokens file.
func writeUITokens(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ui-tokens.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A trickled body is cut off after the read timeout (issue 12, finding 8);
// the server goes on answering. The timeout (--http-read-timeout, 30 s by
// default) is 2 s here and a byte comes every 200 ms: each read gets a byte
// ten times within the timeout, so only a deadline on the whole body, not
// one per read, cuts the connection.
func TestServeCutsOffATrickledBody(t *testing.T) {
	t.Parallel()
	base := startServe(t, "--http-read-timeout", "2s")
	addr := strings.TrimPrefix(base, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /v1/tool_calls HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, c) // until the server closes the connection
	}()
	start := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			t.Logf("cut off after %v", time.Since(start).Round(time.Second))
			if status, _, _ := httpDo(t, "GET", base+"/healthz", ""); status != 200 {
				t.Errorf("/healthz after: %d", status)
			}
			return
		case <-tick.C:
			_, _ = c.Write([]byte("["))
			if time.Since(start) > 2*time.Minute {
				t.Fatal("the trickled body is still being read after 2 minutes")
			}
		}
	}
}
