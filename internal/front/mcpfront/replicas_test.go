package mcpfront_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// dialOptions say how dial connects a go-sdk client.
type dialOptions struct {
	version     string            // the protocol revision asked for; "": the go-sdk's latest (2026-07-28)
	name        string            // clientInfo.name; "": toolpool-test
	token       string            // the bearer token, if any
	poolSession string            // a Toolpool-Session header, if any
	rt          http.RoundTripper // the transport; nil: a fresh one
	opts        *mcp.ClientOptions
}

// headers adds headers to every request.
type headers struct {
	h    http.Header
	next http.RoundTripper
}

func (hd headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range hd.h {
		r.Header[k] = v
	}
	return hd.next.RoundTrip(r)
}

// dial opens a go-sdk client session to url as o says.
func dial(t *testing.T, url string, o dialOptions) *mcp.ClientSession {
	t.Helper()
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	rt := o.rt
	if rt == nil {
		rt = base
	}
	h := http.Header{}
	if o.token != "" {
		h.Set("Authorization", "Bearer "+o.token)
	}
	if o.poolSession != "" {
		h.Set("Toolpool-Session", o.poolSession)
	}
	name := o.name
	if name == "" {
		name = "toolpool-test"
	}
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, o.opts)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: headers{h, rt}}},
		&mcp.ClientSessionOptions{ProtocolVersion: o.version})
	if err != nil {
		t.Fatalf("connect (%q): %v", o.version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// roundRobin sends each request to the next of its hosts, as a
// round-robin load balancer does, and counts them by host and by
// protocol revision.
type roundRobin struct {
	hosts []string
	next  atomic.Int64
	rt    http.RoundTripper

	mu       sync.Mutex
	byHost   map[string]int
	versions map[string]int
}

func newRoundRobin(t *testing.T, urls ...string) *roundRobin {
	rr := &roundRobin{byHost: map[string]int{}, versions: map[string]int{}}
	for _, u := range urls {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		rr.hosts = append(rr.hosts, pu.Host)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	rr.rt = base
	return rr
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	host := rr.hosts[int(rr.next.Add(1))%len(rr.hosts)]
	r = r.Clone(r.Context())
	r.URL.Host, r.Host = host, host
	rr.mu.Lock()
	rr.byHost[host]++
	rr.versions[r.Header.Get("Mcp-Protocol-Version")]++
	rr.mu.Unlock()
	return rr.rt.RoundTrip(r)
}

func (rr *roundRobin) counts() (map[string]int, map[string]int) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return clone(rr.byHost), clone(rr.versions)
}

func clone(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// startReplicas starts an embedded server, a worker announcing the demo
// tools and two orchestrators, each with its own NATS connection and HTTP
// server: two replicas of one pool. It returns their /mcp endpoints.
func startReplicas(t *testing.T, mod func(*pooltest.OrchestratorConfig)) []string {
	t.Helper()
	srv, _, _ := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	if err := demo.Register(reg); err != nil {
		t.Fatal(err)
	}
	pooltest.StartServer(t, srv.ClientURL(), reg, func(c *pooltest.ServerConfig) { c.NoAnnounce = false })
	var urls []string
	for range 2 {
		orch := pooltest.StartOrchestrator(t, natstest.Connect(t, srv.ClientURL()), nil, func(c *pooltest.OrchestratorConfig) {
			if mod != nil {
				mod(c)
			}
		})
		hs, err := orch.NewHTTPServer(httpapi.ServerConfig{Loopback: true})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = hs.Serve(ln) }()
		t.Cleanup(func() {
			orch.MCP().EndStreams()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := hs.Stop(ctx); err != nil {
				t.Errorf("http server Stop: %v", err)
			}
		})
		urls = append(urls, "http://"+ln.Addr().String()+"/mcp")
	}
	return urls
}

// TestReplicasRoundRobin: two orchestrators on one JetStream behind a
// round-robin balancer (each request to the other replica): a go-sdk
// client of 2026-07-28 (no session) and one of 2025-11-25 (a session one
// replica opened, signed with the key both read from JetStream; and one of
// 2025-03-26) list and call tools.
func TestReplicasRoundRobin(t *testing.T) {
	t.Parallel()
	urls := startReplicas(t, func(c *pooltest.OrchestratorConfig) { c.MCP.Token = testToken })
	for _, version := range []string{"", "2025-11-25", "2025-03-26"} {
		t.Run("version "+version, func(t *testing.T) {
			rr := newRoundRobin(t, urls...)
			cs := dial(t, urls[0], dialOptions{version: version, token: testToken, rt: rr, name: "rr-" + version})
			want := version
			if want == "" {
				want = "2026-07-28"
			}
			if got := cs.InitializeResult().ProtocolVersion; got != want {
				t.Errorf("negotiated %q, want %q", got, want)
			}
			if si := cs.InitializeResult().ServerInfo; si == nil || si.Name != "toolpool" || si.Version == "" {
				t.Errorf("serverInfo %+v; want toolpool with its build version", si)
			}
			ctx := t.Context()
			for i := range 3 {
				lt, err := cs.ListTools(ctx, nil)
				if err != nil || len(lt.Tools) != 3 {
					t.Fatalf("tools/list %d: %v, %v", i, lt, err)
				}
			}
			for i := range 6 {
				res, err := call(t, cs, "echo", map[string]any{"text": "hi"})
				if err != nil || res.IsError || text(t, res) != "hi" {
					t.Fatalf("echo %d: %+v, %v", i, res, err)
				}
			}
			byHost, versions := rr.counts()
			for _, u := range urls {
				pu, _ := url.Parse(u)
				if byHost[pu.Host] < 5 {
					t.Errorf("replica %s served %d requests: %v", pu.Host, byHost[pu.Host], byHost)
				}
			}
			if version == "" && versions["2026-07-28"] < 10 {
				t.Errorf("requests by revision %v: the client did not speak 2026-07-28", versions)
			}
		})
	}
}

// TestStatelessWire: what a 2026-07-28 request gets on /mcp, raw:
// server/discover lists the revisions down to 2024-11-05; a tools/call
// answers with resultType; the Mcp-Method header must match the body
// (the spec's header-mismatch error); GET has no stream (405); an
// initialize of 2025-11-25 gets a signed session id, and a session id no
// replica issued is 404.
func TestStatelessWire(t *testing.T) {
	t.Parallel()
	p := startPool(t, nil)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	send := func(method, body string, hdr map[string]string) answer {
		t.Helper()
		req, err := http.NewRequest(method, p.url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, string(b)}
	}
	v26 := func(method, name string) map[string]string {
		h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
		if name != "" {
			h["Mcp-Name"] = name
		}
		return h
	}

	a := send(http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`, v26("server/discover", ""))
	if a.status != http.StatusOK || !strings.Contains(a.body, `"supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"]`) {
		t.Errorf("server/discover: %d %s", a.status, a.body)
	}
	if a.header.Get("Mcp-Session-Id") != "" {
		t.Errorf("server/discover got a session id %q", a.header.Get("Mcp-Session-Id"))
	}

	callBody := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},` + meta + `}}`
	a = send(http.MethodPost, callBody, v26("tools/call", "echo"))
	if a.status != http.StatusOK || !strings.Contains(a.body, `"resultType":"complete"`) || !strings.Contains(a.body, `"text":"x"`) {
		t.Errorf("tools/call: %d %s", a.status, a.body)
	}
	a = send(http.MethodPost, callBody, v26("tools/call", "flaky"))
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, `-32020`) {
		t.Errorf("tools/call with Mcp-Name flaky for echo: %d %s; want 400, -32020 (header mismatch)", a.status, a.body)
	}
	a = send(http.MethodPost, callBody, v26("tools/list", ""))
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, `-32020`) {
		t.Errorf("tools/call with Mcp-Method tools/list: %d %s; want 400, -32020", a.status, a.body)
	}
	bad := v26("tools/call", "echo")
	bad["Toolpool-Session"] = "has a space"
	if a = send(http.MethodPost, callBody, bad); a.status != http.StatusBadRequest || !strings.Contains(a.body, "Toolpool-Session") {
		t.Errorf("a bad Toolpool-Session header: %d %s", a.status, a.body)
	}
	withID := v26("tools/call", "echo")
	withID["Mcp-Session-Id"] = "stale"
	if a = send(http.MethodPost, callBody, withID); a.status != http.StatusOK || !strings.Contains(a.body, `"text":"x"`) {
		t.Errorf("a 2026-07-28 call with an Mcp-Session-Id (ignored): %d %s", a.status, a.body)
	}
	if a = send(http.MethodPost, `{"jsonrpc":"2.0","id":8,"method":"nope/nope","params":{`+meta+`}}`, v26("nope/nope", "")); a.status != http.StatusNotFound || !strings.Contains(a.body, "-32601") {
		t.Errorf("an unknown method of 2026-07-28: %d %s, want 404 with -32601", a.status, a.body)
	}
	a = send(http.MethodGet, "", map[string]string{"Mcp-Protocol-Version": "2026-07-28"})
	if a.status != http.StatusMethodNotAllowed {
		t.Errorf("GET of 2026-07-28: %d %s, want 405", a.status, a.body)
	}

	a = send(http.MethodPost, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, nil)
	id := a.header.Get("Mcp-Session-Id")
	if a.status != http.StatusOK || !strings.Contains(id, ".") || !strings.Contains(a.body, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize of 2025-11-25: %d %q %s", a.status, id, a.body)
	}
	list := `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	old := map[string]string{"Mcp-Protocol-Version": "2025-11-25", "Mcp-Session-Id": id}
	if a = send(http.MethodPost, list, old); a.status != http.StatusOK || !strings.Contains(a.body, `"echo"`) {
		t.Errorf("tools/list in the session: %d %s", a.status, a.body)
	}
	raw, _, _ := strings.Cut(id, ".")
	for _, bad := range []string{raw, raw + ".AAAAAAAAAAAAAAAAAAAAAA", "nonsense", id + "x"} {
		old["Mcp-Session-Id"] = bad
		if a = send(http.MethodPost, list, old); a.status != http.StatusNotFound {
			t.Errorf("session id %q: %d %s, want 404", bad, a.status, a.body)
		}
	}
}

// TestSessionOfAnotherCredential: a session id is bound to the credential
// that opened it: another key's request with it is 404 on every replica,
// and the key that opened it is served on both.
func TestSessionOfAnotherCredential(t *testing.T) {
	t.Parallel()
	keys, err := apikey.Parse(nil, []byte(`[{tenant: a, key: "key-a-0123456789abcdef"}, {tenant: b, key: "key-b-0123456789abcdef"}]`), "keys")
	if err != nil {
		t.Fatal(err)
	}
	urls := startReplicas(t, func(c *pooltest.OrchestratorConfig) { c.MCP.Keys = keys })
	a := post(t, urls[0], "key-a-0123456789abcdef", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	id := a.header.Get("Mcp-Session-Id")
	if a.status != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", a.status, a.body)
	}
	for _, u := range urls {
		for token, want := range map[string]int{"key-a-0123456789abcdef": http.StatusOK, "key-b-0123456789abcdef": http.StatusNotFound} {
			req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s with %s: %d, want %d", u, token[:5], resp.StatusCode, want)
			}
		}
	}
	// The replica that does not hold the session has no stream of it
	// (405) and nothing to end (204); the one that holds it ends it, and
	// its client is served statelessly from then on.
	do := func(method, u string) int {
		req, _ := http.NewRequest(method, u, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Authorization", "Bearer key-a-0123456789abcdef")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		method, url string
		want        int
	}{
		{http.MethodGet, urls[1], http.StatusMethodNotAllowed},
		{http.MethodDelete, urls[1], http.StatusNoContent},
		{http.MethodDelete, urls[0], http.StatusNoContent},
	} {
		if got := do(c.method, c.url); got != c.want {
			t.Errorf("%s on %s: %d, want %d", c.method, c.url, got, c.want)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, urls[0], strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Authorization", "Bearer key-a-0123456789abcdef")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("tools/list after the DELETE: %d", resp.StatusCode)
	}
}

// TestRepeatedInitializeKeepsTheSignedID: an initialize sent again on a
// session its replica holds is refused by the go-sdk, whose answer names
// the session: it must name it as the client knows it, signed. A client
// that takes the id of any answer (the TypeScript SDK's transport does)
// lost its session to the bare id, which no replica accepts.
func TestRepeatedInitializeKeepsTheSignedID(t *testing.T) {
	t.Parallel()
	urls := startReplicas(t, nil)
	const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	a := post(t, urls[0], "", initialize)
	id := a.header.Get("Mcp-Session-Id")
	if a.status != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", a.status, a.body)
	}
	send := func(body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, urls[0], strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Mcp-Session-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
	}
	if _, got := send(initialize); got != "" && got != id {
		t.Errorf("a repeated initialize names the session %q, want %q (as issued) or none", got, id)
	}
	if status, _ := send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); status != http.StatusOK {
		t.Errorf("tools/list on the session after the repeated initialize: %d", status)
	}
}
