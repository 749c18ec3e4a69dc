package httpapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// serverBundle is a Server on a loopback port serving /healthz, /readyz
// (the Server's readiness), /metrics, /block (waits for release) and
// /echo (reads the body).
type serverBundle struct {
	srv     *Server
	base    string
	addr    string
	release chan struct{}
	entered chan struct{}
	served  chan error
}

func startServer(t *testing.T, mod func(*ServerConfig)) *serverBundle {
	t.Helper()
	b := &serverBundle{release: make(chan struct{}), entered: make(chan struct{}, 100), served: make(chan error, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := b.srv.Ready(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") })
	mux.HandleFunc("/block", func(w http.ResponseWriter, _ *http.Request) {
		b.entered <- struct{}{}
		<-b.release
		_, _ = io.WriteString(w, "released")
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
			return
		}
		_, _ = w.Write(data)
	})
	cfg := ServerConfig{Handler: mux, Loopback: true, Logger: natstest.Logger(t)}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	b.base = "http://" + b.addr
	go func() { b.served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		select {
		case <-b.release:
		default:
			close(b.release)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
		<-b.served
	})
	return b
}

func (b *serverBundle) get(t *testing.T, path string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("GET", b.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(data)
}

// 200 connections trickling their bodies do not stop /healthz from
// answering, and each is closed after the read timeout (issue 12,
// finding 8).
func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	b := startServer(t, func(c *ServerConfig) { c.ReadTimeout = 2 * time.Second })
	const n = 200
	var closed atomic.Int64
	var wg sync.WaitGroup
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: "+b.addr+"\r\nContent-Length: 100000\r\n\r\nx"); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_, _ = io.Copy(io.Discard, c) // returns when the server closes it
			closed.Add(1)
		})
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
		wg.Wait()
	}()
	if status, _, body := b.get(t, "/healthz"); status != 200 || body != "ok" {
		t.Fatalf("/healthz with %d slow connections: %d %s", n, status, body)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for {
		select {
		case <-done:
			if status, _, _ := b.get(t, "/healthz"); status != 200 {
				t.Errorf("/healthz after: %d", status)
			}
			return
		case <-tick.C:
			for _, c := range conns {
				_, _ = c.Write([]byte("x")) // keep trickling
			}
		case <-deadline:
			t.Fatalf("%d of %d slow connections still open after a minute (read timeout 2s)", n-closed.Load(), n)
		}
	}
}

// A request whose body is slow but within the read timeout, then a wait
// longer than it, is answered: the read deadline does not cut the answer.
func TestReadTimeoutDoesNotCutALongAnswer(t *testing.T) {
	t.Parallel()
	api, err := New(Config{Dispatcher: &slowDispatcher{wait: 2500 * time.Millisecond}, Definitions: RegistryDefinitions(tools.NewRegistry())})
	if err != nil {
		t.Fatal(err)
	}
	b := startServer(t, func(c *ServerConfig) { c.ReadTimeout = time.Second; c.Handler = api })
	req, _ := http.NewRequest("POST", b.base+"/v1/tool_calls", strings.NewReader(`[{"type":"tool_use","id":"a","name":"echo"}]`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "waited") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
}

// slowDispatcher answers every call after wait.
type slowDispatcher struct{ wait time.Duration }

func (s *slowDispatcher) Dispatch(ctx context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	select {
	case <-time.After(s.wait):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		out[i] = envelope.Result{V: 1, CallID: c.ID, Tool: c.Name, Content: envelope.Text("waited")}
	}
	return out, nil
}

// Past MaxRequests a request is answered 503 with Retry-After at once;
// health probes still answer. Past MaxConns and the ProbeConns kept for
// probes, a connection is closed at once.
func TestRequestAndConnectionBounds(t *testing.T) {
	t.Parallel()
	b := startServer(t, func(c *ServerConfig) { c.MaxRequests = 2; c.MaxConns = 6 })
	results := make(chan int, 2)
	for range 2 {
		go func() {
			status, _, _ := b.get(t, "/block")
			results <- status
		}()
	}
	<-b.entered
	<-b.entered
	status, hdr, body := b.get(t, "/block")
	if status != 503 || hdr.Get("Retry-After") != "2" || !strings.Contains(body, "as many requests") {
		t.Errorf("third request: %d %v %s", status, hdr, body)
	}
	if status, _, _ := b.get(t, "/healthz"); status != 200 {
		t.Errorf("/healthz at the bound: %d", status)
	}
	// Two connections are busy; four more idle ones fill MaxConns, and
	// ProbeConns more the probes' reserve.
	var idle []net.Conn
	for range 4 + ProbeConns {
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	// The next one is closed at once, before any request is read.
	natstest.Eventually(t, 30*time.Second, "a connection past MaxConns closed at once", func() bool {
		c, err := net.Dial("tcp", b.addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		return errors.Is(err, io.EOF) || isReset(err)
	})
	for _, c := range idle {
		_ = c.Close()
	}
	close(b.release)
	for range 2 {
		if s := <-results; s != 200 {
			t.Errorf("a blocked request ended %d", s)
		}
	}
	natstest.Eventually(t, 30*time.Second, "connections accepted again", func() bool {
		status, _, _ := b.get(t, "/healthz")
		return status == 200
	})
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

// Shutdown drains: readiness fails at once, new requests get 503 with
// Retry-After, health answers, the request in flight completes, and only
// then does Shutdown return (issue 12, finding 3).
func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	b := startServer(t, nil)
	inFlight := make(chan string, 1)
	go func() {
		_, _, body := b.get(t, "/block")
		inFlight <- body
	}()
	<-b.entered
	// A kept-alive connection opened before the drain.
	kept, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shut <- b.srv.Stop(ctx)
	}()
	natstest.Eventually(t, 30*time.Second, "/readyz failing", func() bool {
		status, _, _ := b.get(t, "/readyz")
		return status == 503
	})
	if status, _, _ := b.get(t, "/healthz"); status != 200 {
		t.Errorf("/healthz during the drain: %d", status)
	}
	fmt.Fprintf(kept, "GET /block HTTP/1.1\r\nHost: %s\r\n\r\n", b.addr)
	resp, err := http.ReadResponse(bufio.NewReader(kept), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !resp.Close {
		t.Errorf("a new request during the drain: %d %v", resp.StatusCode, resp.Header)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) with a request in flight", err)
	default:
	}
	close(b.release)
	if body := <-inFlight; body != "released" {
		t.Errorf("the request in flight got %q", body)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// On loopback the Host must be a loopback name or an allowed host; on
// another address any Host passes unless hosts are configured, and
// /metrics needs a key that may read them.
func TestHostsAndMetricsKey(t *testing.T) {
	t.Parallel()
	loop := startServer(t, func(c *ServerConfig) { c.AllowedHosts = []string{"pool.internal", "api.example:443"} })
	port := loop.addr[strings.LastIndex(loop.addr, ":")+1:]
	for host, want := range map[string]int{
		"127.0.0.1:" + port: 200, "localhost:" + port: 200, "LOCALHOST.:" + port: 200, "[::1]:" + port: 200, "127.0.0.2": 200,
		"pool.internal:" + port: 200, "pool.internal": 200, "api.example:443": 200,
		"api.example:80": 403, "evil.example:" + port: 403, "127.0.0.1.nip.io:" + port: 403, "10.0.0.1:" + port: 403,
	} {
		if status, _, body := loop.get(t, "/healthz", "Host", host); status != want {
			t.Errorf("loopback server, Host %q: %d %s, want %d", host, status, body, want)
		}
	}
	keys, err := apikey.Parse(nil, []byte(`[{tenant: ops, key: ops-0123456789abcdef, metrics: true}, {tenant: agent, key: agent-0123456789abcdef}]`), "test")
	if err != nil {
		t.Fatal(err)
	}
	open := startServer(t, func(c *ServerConfig) { c.Loopback = false; c.Keys = keys })
	if status, _, _ := open.get(t, "/healthz", "Host", "10.1.2.3:8080"); status != 200 {
		t.Errorf("non-loopback server, a pod IP as Host: %d", status)
	}
	for auth, want := range map[string]int{"": 401, "Bearer agent-0123456789abcdef": 403, "Bearer ops-0123456789abcdef": 200} {
		if status, _, _ := open.get(t, "/metrics", "Authorization", auth); status != want {
			t.Errorf("non-loopback /metrics, Authorization %q: %d, want %d", auth, status, want)
		}
	}
	if status, _, _ := open.get(t, "/readyz"); status != 200 {
		t.Errorf("non-loopback /readyz without a key: %d", status)
	}
	if status, _, _ := loop.get(t, "/metrics"); status != 200 {
		t.Errorf("loopback /metrics without a key: %d", status)
	}
}

// TestSlowBodyGets408: a body that does not arrive within ReadTimeout is
// answered 408, also when WriteTimeout is no longer than ReadTimeout (as
// by default, 30 s each): the answer's write deadline must not run out
// with the read's.
func TestSlowBodyGets408(t *testing.T) {
	t.Parallel()
	b := startServer(t, func(c *ServerConfig) { c.ReadTimeout, c.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond })
	conn, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	status, err := bufio.NewReader(conn).ReadString('\n')
	if !strings.HasPrefix(status, "HTTP/1.1 408") {
		t.Errorf("a body that never arrives: status line %q, %v; want 408", status, err)
	}
}
