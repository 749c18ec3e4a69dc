package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
)

// rawRequest sends req on a new connection and reads the answer's status
// line and headers (not its body).
func rawRequest(t *testing.T, addr, req string) (*http.Response, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp, c
}

// TestProbesBesideTheConnectionCap: with every connection of MaxConns
// held, /healthz and /readyz are still answered, many times over (each on
// a connection of the probes' reserve, closed after the answer), while
// any other request on such a connection gets 503 (issue 23: health
// probes were refused 59 of 59 at --http-max-conns).
func TestProbesBesideTheConnectionCap(t *testing.T) {
	t.Parallel()
	// A 2 s probe read window (5 s by default): the probes below send
	// their requests at once, and the silent one is given back sooner.
	b := startServer(t, func(c *ServerConfig) { c.MaxConns = 3; c.probeReadWindow = 2 * time.Second })
	for range 3 {
		go func() { _, _, _ = b.get(t, "/block") }()
		<-b.entered
	}
	for i := range 3 * ProbeConns {
		path := []string{"/healthz", "/readyz"}[i%2]
		resp, _ := rawRequest(t, b.addr, "GET "+path+" HTTP/1.1\r\nHost: "+b.addr+"\r\n\r\n")
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !resp.Close {
			t.Fatalf("probe %d (%s) with MaxConns held: %s %q, Connection %q; want 200 and Connection: close", i, path, resp.Status, body, resp.Header.Get("Connection"))
		}
	}
	status, hdr, body := b.get(t, "/metrics")
	if status != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(body, "kept for health probes") {
		t.Errorf("another path with MaxConns held: %d %q", status, body)
	}
	// A client that takes a probe connection and sends nothing gives it
	// back within its probe read window.
	c, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a silent probe connection got bytes")
	}
	close(b.release)
	natstest.Eventually(t, 30*time.Second, "the API served again once the connections are given back", func() bool {
		status, _, _ := b.get(t, "/metrics")
		return status == 200
	})
}

// TestDefaultMaxConnsFitsTheFileLimit: the default cap leaves a quarter of
// the open-file limit to the rest of the process and room for the probes.
func TestDefaultMaxConnsFitsTheFileLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit uint64
		want  int
	}{{1024, 752}, {256, 176}, {65536, MaxConnsDefault}, {1 << 62, MaxConnsDefault}, {40, 64}, {0, MaxConnsDefault}} {
		if got := maxConnsFor(tc.limit); got != tc.want {
			t.Errorf("maxConnsFor(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
	n, limit := DefaultMaxConns()
	if limit > 0 && uint64(n+ProbeConns) > limit {
		t.Errorf("DefaultMaxConns() = %d with a file limit of %d", n, limit)
	}
	if got := (ServerConfig{}).WithDefaults().MaxConns; got != n {
		t.Errorf("the default MaxConns is %d, want DefaultMaxConns() = %d", got, n)
	}
}

// TestExpectContinueOverTheLimit: a body declared over MaxBodyBytes with
// Expect: 100-continue gets a 413 with Connection: close, and no 100
// Continue: the client sends nothing (issue 23: a 50 MB body ended in a
// connection reset, and an agent that re-posts on connection errors
// loops). The server checks it for every path, /mcp's included.
func TestExpectContinueOverTheLimit(t *testing.T) {
	t.Parallel()
	b := startServer(t, nil)
	resp, c := rawRequest(t, b.addr, "POST /echo HTTP/1.1\r\nHost: "+b.addr+"\r\nContent-Type: application/json\r\n"+
		"Content-Length: 52428800\r\nExpect: 100-continue\r\n\r\n")
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
		t.Fatalf("status %s, Connection %q; want 413 and Connection: close", resp.Status, resp.Header.Get("Connection"))
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "over the limit of "+strconv.Itoa(MaxBodyBytesDefault)) {
		t.Errorf("body %s", body)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("the connection was not closed after the 413")
	}
}
