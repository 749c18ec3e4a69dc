package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// echoDispatcher answers each call with its input's text, as the demo
// echo tool does, in this process: what a test of the HTTP front door's
// memory measures is the front door's, not an embedded JetStream
// server's store.
type echoDispatcher struct{ returned atomic.Int64 }

func (d *echoDispatcher) Dispatch(_ context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	out := make([]envelope.Result, len(calls))
	for i, c := range calls {
		var in struct{ Text string }
		if err := json.Unmarshal(c.Input, &in); err != nil {
			return nil, err
		}
		out[i] = envelope.Result{V: envelope.Version, CallID: c.ID, Tool: c.Name, Content: envelope.Text(in.Text)}
	}
	d.returned.Add(1)
	return out, nil
}

// smallSendBuffers gives the connections it accepts a small send buffer:
// a client that does not read blocks the server's writes at once, as on
// a real network, rather than after megabytes of loopback buffers.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}

// limitedAPI is the HTTP API of a whole pool behind a Server on a
// loopback port.
type limitedAPI struct{ addr string }

func startLimitedAPI(t *testing.T, api func(*httpapi.Config), server func(*httpapi.ServerConfig)) *limitedAPI {
	t.Helper()
	p := pooltest.Start(t)
	cfg := httpapi.Config{Dispatcher: p.D, Definitions: httpapi.RegistryDefinitions(p.Reg), Logger: natstest.Logger(t)}
	if api != nil {
		api(&cfg)
	}
	h, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc := httpapi.ServerConfig{Handler: h, Loopback: true, Logger: natstest.Logger(t)}
	if server != nil {
		server(&sc)
	}
	return serveLimited(t, sc)
}

// serveLimited serves cfg on a loopback port, its connections with small
// send buffers, until the test ends.
func serveLimited(t *testing.T, cfg httpapi.ServerConfig) *limitedAPI {
	t.Helper()
	srv, err := httpapi.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { _ = srv.Serve(smallSendBuffers{ln}); close(served) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
		<-served
	})
	return &limitedAPI{addr: ln.Addr().String()}
}

// dialSmall dials addr with a small receive buffer, as a client that does
// not read gets: the server's writes block soon.
func dialSmall(t *testing.T, addr string) net.Conn {
	t.Helper()
	dialer := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = setRecvBuffer(fd, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := dialer.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// heapInUse is the heap's live bytes after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestUnreadAnswersAreBoundedAndCutOff: clients that post calls with
// large answers and never read them hold no more than their answers'
// bytes each on the server (not the body, the calls read from it and the
// results as well: 6-7 MB per 1 MB call in flight, issue 23), and their
// connections are closed WriteTimeout after the answers were ready, not
// when the calls' timeout has passed.
func TestUnreadAnswersAreBoundedAndCutOff(t *testing.T) {
	const (
		clients   = 8
		calls     = 4
		textBytes = 512 << 10
		answer    = calls * textBytes
		wt        = 4 * time.Second
	)
	d := &echoDispatcher{}
	h, err := httpapi.New(httpapi.Config{Dispatcher: d, Definitions: httpapi.DefinitionsFunc(func(context.Context) ([]tools.Definition, error) { return nil, nil }),
		Logger: natstest.Logger(t), WriteTimeout: wt})
	if err != nil {
		t.Fatal(err)
	}
	a := serveLimited(t, httpapi.ServerConfig{Handler: h, Loopback: true, Logger: natstest.Logger(t), WriteTimeout: wt, MaxConns: clients})
	text := strings.Repeat("a", textBytes)
	post := func(c net.Conn, i int) {
		call := func() string {
			return `{"type":"tool_use","id":"` + uid("toolu_big_") + `","name":"echo","input":{"text":"` + text + `"}}`
		}
		list := make([]string, calls)
		for j := range list {
			list[j] = call()
		}
		body := `[` + strings.Join(list, ",") + `]`
		req := "POST /v1/tool_calls?timeout=40s HTTP/1.1\r\nHost: " + a.addr + "\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
		if _, err := io.WriteString(c, req); err != nil {
			t.Errorf("client %d: %v", i, err)
		}
	}
	// One call read in full first: the pool's own memory is in the base.
	warm := dialSmall(t, a.addr)
	post(warm, -1)
	_ = warm.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(warm), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(resp.Body); len(got) < answer || resp.Header.Get(httpapi.HeaderErrorIndexes) != "" {
		t.Fatalf("the warm-up answer: %d bytes, errors at %q: %.300s", len(got), resp.Header.Get(httpapi.HeaderErrorIndexes), got[max(0, len(got)-300):])
	}
	_ = warm.Close()
	natstest.Eventually(t, 30*time.Second, "the warm-up connection closed", func() bool { return a.served(t, clients) })
	base := heapInUse()

	conns := make([]net.Conn, clients)
	for i := range conns {
		conns[i] = dialSmall(t, a.addr)
		defer conns[i].Close()
		post(conns[i], i)
	}
	natstest.Eventually(t, 60*time.Second, "every call answered", func() bool { return d.returned.Load() == clients+1 })
	held := uint64(1 << 62)
	for range 10 { // the least of a few samples: the steady state, not an answer being encoded
		held = min(held, heapInUse()-min(base, heapInUse()))
		time.Sleep(50 * time.Millisecond)
	}
	perClient := held / clients
	t.Logf("%d clients not reading %d-byte answers hold %d bytes, %d each", clients, answer, held, perClient)
	if limit := uint64(answer)*9/8 + 64<<10; perClient > limit {
		t.Errorf("each client not reading holds %d bytes on the server; want at most %d (its answer's %d bytes, and a margin)", perClient, limit, answer)
	}

	// The connections are closed WriteTimeout after the answers were
	// ready: the API takes connections again long before the calls'
	// timeout (40s), and what the clients read then is cut off.
	natstest.Eventually(t, 25*time.Second, "the unread connections closed by the write timeout", func() bool {
		return a.served(t, clients)
	})
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		if n > answer {
			t.Errorf("client %d read %d bytes of an answer cut off after the write timeout", i, n)
		}
	}
}

// served reports whether n requests on n connections open at once are
// all served: the API has n connections free.
func (a *limitedAPI) served(t *testing.T, n int) bool {
	t.Helper()
	ok := true
	for range n {
		c, err := net.Dial("tcp", a.addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(c, "GET /v1/tools HTTP/1.1\r\nHost: "+a.addr+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		ok = ok && err == nil && resp.StatusCode == 200
	}
	return ok
}

// get answers a GET on a new connection with its status, 0 when the
// connection was closed without one.
func (a *limitedAPI) get(t *testing.T, path string) int {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + a.addr + path)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestIdleConnectionsClosed: a connection that sends nothing is closed
// after ReadHeaderTimeout, and one idle after a request after
// IdleTimeout.
func TestIdleConnectionsClosed(t *testing.T) {
	t.Parallel()
	a := startLimitedAPI(t, nil, func(c *httpapi.ServerConfig) { c.ReadHeaderTimeout, c.IdleTimeout = time.Second, time.Second })
	silent, err := net.Dial("tcp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	_ = silent.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); n > 0 || isTimeout(err) {
		t.Errorf("a connection that sent nothing: %d bytes, %v; want it closed", n, err)
	}
	kept, err := net.Dial("tcp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	_ = kept.SetDeadline(time.Now().Add(30 * time.Second))
	_, _ = io.WriteString(kept, "GET /v1/tools HTTP/1.1\r\nHost: "+a.addr+"\r\n\r\n")
	br := bufio.NewReader(kept)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("GET /v1/tools: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if n, err := br.Read(make([]byte, 1)); n > 0 || isTimeout(err) {
		t.Errorf("a connection idle after a request: %d bytes, %v; want it closed", n, err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestBodyOverTheAPILimit: a POST /v1/tool_calls over the API's
// MaxBodyBytes (below the server's) gets a 413 with Connection: close:
// declared with Expect: 100-continue, before any 100 Continue; chunked,
// once the limit is read, and the client reads the 413 rather than a
// reset while it still sends.
func TestBodyOverTheAPILimit(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	a := startLimitedAPI(t, func(c *httpapi.Config) { c.MaxBodyBytes = limit }, nil)
	head := "POST /v1/tool_calls HTTP/1.1\r\nHost: " + a.addr + "\r\nContent-Type: application/json\r\n"

	c, err := net.Dial("tcp", a.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, _ = io.WriteString(c, head+"Content-Length: 1048576\r\nExpect: 100-continue\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
		t.Fatalf("Expect: 100-continue over the limit: %v %v; want 413 with Connection: close", resp, err)
	}
	checkTooLarge(t, resp, limit)

	for range 5 {
		c, err := net.Dial("tcp", a.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := io.WriteString(c, head+"Transfer-Encoding: chunked\r\n\r\n"); err != nil {
				return
			}
			chunk := "10000\r\n" + strings.Repeat(" ", 0x10000) + "\r\n"
			for range 64 {
				if _, err := io.WriteString(c, chunk); err != nil {
					return // the server stopped reading: expected
				}
			}
		})
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
			t.Fatalf("a chunked body over the limit: %v %v; want 413 with Connection: close", resp, err)
		}
		checkTooLarge(t, resp, limit)
		_ = c.Close()
		wg.Wait()
	}
}

func checkTooLarge(t *testing.T, resp *http.Response, limit int) {
	t.Helper()
	var e httpapi.ErrorResponse
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Type != httpapi.ErrorTooLarge ||
		!strings.Contains(e.Error.Message, strconv.Itoa(limit)) {
		t.Errorf("413 body: %+v %v", e, err)
	}
}
