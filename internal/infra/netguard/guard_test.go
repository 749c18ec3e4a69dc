package netguard

import (
	"context"
	"errors"
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

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// fakeResolver answers from a map and records the names it was asked
// for. A name it does not know is "no such host".
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr // successive answers; the last repeats
	asked   []string
}

func newResolver(m map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]netip.Addr{}}
	for name, addrs := range m {
		r.add(name, addrs...)
	}
	return r
}

// add appends one answer for name.
func (r *fakeResolver) add(name string, addrs ...string) {
	var a []netip.Addr
	for _, s := range addrs {
		a = append(a, netip.MustParseAddr(s))
	}
	r.answers[name] = append(r.answers[name], a)
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	ans := r.answers[host]
	if len(ans) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := ans[0]
	if len(ans) > 1 {
		r.answers[host] = ans[1:]
	}
	return append([]netip.Addr(nil), out...), nil
}

// dialLog records every dial the guard makes after its checks. It really
// dials loopback addresses only: any other address fails the test and is
// not dialled, so a broken guard cannot send traffic off this machine.
type dialLog struct {
	t     *testing.T
	mu    sync.Mutex
	addrs []string
}

func (l *dialLog) dial(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
	l.mu.Lock()
	l.addrs = append(l.addrs, address)
	l.mu.Unlock()
	ap, err := netip.ParseAddrPort(address)
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		l.t.Errorf("the guard dialled %s, which is not a loopback address", address)
		return nil, errors.New("test: refusing to dial a non-loopback address")
	}
	return d.DialContext(ctx, network, address)
}

func (l *dialLog) dials() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.addrs...)
}

// guardedBy returns g with a dialLog installed.
func guardedBy(t *testing.T, g *Guard) (*Guard, *dialLog) {
	l := &dialLog{t: t}
	g.dial = l.dial
	return g, l
}

// wantBlocked checks that err is the guard's refusal of host: a
// *BlockedError, permanent, with the message for the model.
func wantBlocked(t *testing.T, err error, host string) {
	t.Helper()
	be, ok := errors.AsType[*BlockedError](err)
	if !ok {
		t.Fatalf("error %v, want a *BlockedError", err)
	}
	if be.Host != host {
		t.Errorf("BlockedError.Host = %q, want %q", be.Host, host)
	}
	d := classify.Classify(err)
	if d.Class != envelope.ClassPermanent || d.Retryable {
		t.Errorf("class %s retryable %v, want permanent, not retryable", d.Class, d.Retryable)
	}
	want := "the address of " + host + " is not allowed (private/loopback network)"
	if !strings.Contains(d.Cause, want) {
		t.Errorf("cause %q, want it to contain %q", d.Cause, want)
	}
	msg := d.Message(classify.MessageInput{Tool: "http_request", Attempts: 1})
	if be.Addr.IsValid() && be.Addr.String() != host && strings.Contains(msg, be.Addr.String()) {
		t.Errorf("message %q shows the resolved address %s", msg, be.Addr)
	}
}

// acceptLog is a loopback listener that hands over what it accepts.
type acceptLog struct {
	ln    net.Listener
	conns chan net.Conn
}

func newAcceptLog(t *testing.T) *acceptLog {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &acceptLog{ln: ln, conns: make(chan net.Conn, 16)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.conns <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		close(a.conns)
		for c := range a.conns {
			c.Close()
		}
	})
	return a
}

func (a *acceptLog) addr() string { return a.ln.Addr().String() }

func (a *acceptLog) port() string {
	_, p, _ := net.SplitHostPort(a.addr())
	return p
}

// proveNoAccept shows that nothing connected to a so far: it connects
// with a plain dialer, writes a marker, and checks that the first
// connection the listener accepted is that one.
func (a *acceptLog) proveNoAccept(t *testing.T) {
	t.Helper()
	c, err := net.Dial("tcp", a.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("M")); err != nil {
		t.Fatal(err)
	}
	first := <-a.conns
	defer first.Close()
	_ = first.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 1)
	if _, err := io.ReadFull(first, b); err != nil || b[0] != 'M' {
		t.Fatalf("the listener accepted another connection before the marker one (read %q, %v)", b, err)
	}
}

// expectAccept waits for the next accepted connection.
func (a *acceptLog) expectAccept(t *testing.T) {
	t.Helper()
	select {
	case c := <-a.conns:
		c.Close()
	case <-time.After(30 * time.Second):
		t.Fatal("no connection accepted")
	}
}

func TestControlRefuses(t *testing.T) {
	t.Parallel()
	g := &Guard{}
	for _, addr := range []string{
		"127.0.0.1:80", "[::1]:443", "169.254.169.254:80", "10.0.0.1:80", "0.0.0.0:80",
		"[::ffff:127.0.0.1]:80", "[fe80::1%eth0]:80", "[::]:80", "192.168.0.1:22", "not-an-address",
	} {
		err := g.Control("tcp", addr, nil)
		if _, ok := errors.AsType[*BlockedError](err); !ok {
			t.Errorf("Control(%s) = %v, want a *BlockedError", addr, err)
			continue
		}
		if d := classify.Classify(err); d.Class != envelope.ClassPermanent {
			t.Errorf("Control(%s): class %s, want permanent", addr, d.Class)
		}
	}
	for _, addr := range []string{"8.8.8.8:53", "[2606:4700:4700::1111]:443"} {
		if err := g.Control("tcp", addr, nil); err != nil {
			t.Errorf("Control(%s) = %v, want nil", addr, err)
		}
	}
	allow := &Guard{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	if err := allow.Control("tcp", "127.0.0.1:80", nil); err != nil {
		t.Errorf("Control with 127.0.0.0/8 allowed = %v, want nil", err)
	}
}

// TestDialContextRefusesWithoutDialing: every restricted target, as an IP
// literal or behind a host name, is refused before any dial.
func TestDialContextRefusesWithoutDialing(t *testing.T) {
	t.Parallel()
	res := newResolver(map[string][]string{
		"internal.test": {"10.0.0.1"},
		"metadata.test": {"169.254.169.254"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"mixed.test":    {"10.0.0.5", "::1", "fd00::1"},
		"localhost":     {"127.0.0.1", "::1"},
	})
	g, dials := guardedBy(t, &Guard{Resolver: res})
	tests := []struct{ address, host string }{
		{"127.0.0.1:80", "127.0.0.1"},
		{"[::1]:80", "::1"},
		{"169.254.169.254:80", "169.254.169.254"},
		{"10.0.0.1:80", "10.0.0.1"},
		{"0.0.0.0:80", "0.0.0.0"},
		{"[::]:80", "::"},
		{"[::ffff:127.0.0.1]:80", "::ffff:127.0.0.1"},
		{"[::ffff:169.254.169.254]:80", "::ffff:169.254.169.254"},
		{"[64:ff9b::a9fe:a9fe]:80", "64:ff9b::a9fe:a9fe"},
		{"[fe80::1%eth0]:80", "fe80::1%eth0"},
		{"255.255.255.255:80", "255.255.255.255"},
		{"internal.test:80", "internal.test"},
		{"metadata.test:80", "metadata.test"},
		{"mapped.test:80", "mapped.test"},
		{"mixed.test:443", "mixed.test"},
		{"localhost:8080", "localhost"},
	}
	for _, tc := range tests {
		conn, err := g.DialContext(t.Context(), "tcp", tc.address)
		if conn != nil {
			conn.Close()
		}
		wantBlocked(t, err, tc.host)
	}
	if d := dials.dials(); len(d) != 0 {
		t.Errorf("the guard dialled %v", d)
	}
}

func TestDialContextErrors(t *testing.T) {
	t.Parallel()
	g, dials := guardedBy(t, &Guard{Resolver: newResolver(nil)})
	_, err := g.DialContext(t.Context(), "tcp", "nowhere.test:80")
	if d := classify.Classify(err); d.Code != classify.CodeDNSNotFound {
		t.Errorf("unknown name: %v (code %s), want dns_not_found", err, d.Code)
	}
	if _, err := g.DialContext(t.Context(), "unix", "/tmp/x"); err == nil {
		t.Error("unix network accepted")
	}
	if _, err := g.DialContext(t.Context(), "tcp", "8.8.8.8:http"); err == nil {
		t.Error("a port name accepted")
	}
	if d := dials.dials(); len(d) != 0 {
		t.Errorf("the guard dialled %v", d)
	}
}

// TestDialLoopbackListener dials a real loopback listener: refused with no
// connection unless an allow-list names it.
func TestDialLoopbackListener(t *testing.T) {
	t.Parallel()
	ln := newAcceptLog(t)
	port := ln.port()

	res := newResolver(map[string][]string{
		"svc.test":        {"127.0.0.1"},
		"api.corp.test":   {"127.0.0.1"},
		"other.test":      {"127.0.0.1"},
		"corp.test.evil":  {"127.0.0.1"},
		"localhost.test.": {"127.0.0.1"},
	})
	refused := []struct {
		name    string
		g       *Guard
		address string
		host    string
	}{
		{"no allow-list", &Guard{}, ln.addr(), "127.0.0.1"},
		{"other port allowed", &Guard{AllowHosts: []string{"127.0.0.1:1"}}, ln.addr(), "127.0.0.1"},
		{"other address allowed", &Guard{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}, ln.addr(), "127.0.0.1"},
		{"other host allowed", &Guard{AllowHosts: []string{"svc.test"}, Resolver: res}, "other.test:" + port, "other.test"},
		{"wildcard is not a suffix match", &Guard{AllowHosts: []string{"*.corp.test"}, Resolver: res}, "corp.test.evil:" + port, "corp.test.evil"},
		{"IP entry does not allow a name", &Guard{AllowHosts: []string{"127.0.0.1"}, Resolver: res}, "svc.test:" + port, "svc.test"},
	}
	for _, tc := range refused {
		g, dials := guardedBy(t, tc.g)
		conn, err := g.DialContext(t.Context(), "tcp", tc.address)
		if conn != nil {
			conn.Close()
			t.Fatalf("%s: connected", tc.name)
		}
		wantBlocked(t, err, tc.host)
		if d := dials.dials(); len(d) != 0 {
			t.Errorf("%s: dialled %v", tc.name, d)
		}
	}
	ln.proveNoAccept(t)

	allowed := []struct {
		name    string
		g       *Guard
		address string
	}{
		{"CIDR", &Guard{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, ln.addr()},
		{"host:port", &Guard{AllowHosts: []string{"127.0.0.1:" + port}}, ln.addr()},
		{"IPv4-mapped entry", &Guard{AllowHosts: []string{"[::ffff:127.0.0.1]:" + port}}, ln.addr()},
		{"host name", &Guard{AllowHosts: []string{"SVC.test."}, Resolver: res}, "svc.test:" + port},
		{"host name and port", &Guard{AllowHosts: []string{"svc.test:" + port}, Resolver: res}, "svc.test:" + port},
		{"wildcard", &Guard{AllowHosts: []string{"*.corp.test"}, Resolver: res}, "api.corp.test:" + port},
	}
	for _, tc := range allowed {
		g, _ := guardedBy(t, tc.g)
		conn, err := g.DialContext(t.Context(), "tcp", tc.address)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		conn.Close()
		ln.expectAccept(t)
	}
}

// TestControlOnPlainDialer: Control alone stops a net.Dialer before
// connect.
func TestControlOnPlainDialer(t *testing.T) {
	t.Parallel()
	ln := newAcceptLog(t)
	g := &Guard{}
	d := &net.Dialer{Control: g.Control}
	conn, err := d.DialContext(t.Context(), "tcp", ln.addr())
	if conn != nil {
		conn.Close()
		t.Fatal("connected")
	}
	wantBlocked(t, err, "127.0.0.1")
	ln.proveNoAccept(t)
}

// TestMixedAnswerDialsOnlyAllowed: of a name's addresses, only the allowed
// ones are dialled.
func TestMixedAnswerDialsOnlyAllowed(t *testing.T) {
	t.Parallel()
	ln := newAcceptLog(t)
	res := newResolver(map[string][]string{"mixed.test": {"10.0.0.1", "169.254.169.254", "127.0.0.1"}})
	g, dials := guardedBy(t, &Guard{Resolver: res, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	conn, err := g.DialContext(t.Context(), "tcp", "mixed.test:"+ln.port())
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	ln.expectAccept(t)
	if d := dials.dials(); len(d) != 1 || d[0] != ln.addr() {
		t.Errorf("dials %v, want only %s", d, ln.addr())
	}
}

// TestRebinding: each dial resolves again and checks the new answer, so a
// name that first points at an allowed address and then at a restricted
// one is refused the second time.
func TestRebinding(t *testing.T) {
	t.Parallel()
	ln := newAcceptLog(t)
	res := newResolver(nil)
	res.add("rebind.test", "127.0.0.1")
	res.add("rebind.test", "127.0.0.2")
	g, dials := guardedBy(t, &Guard{Resolver: res, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	conn, err := g.DialContext(t.Context(), "tcp", "rebind.test:"+ln.port())
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	ln.expectAccept(t)
	_, err = g.DialContext(t.Context(), "tcp", "rebind.test:"+ln.port())
	wantBlocked(t, err, "rebind.test")
	if d := dials.dials(); len(d) != 1 {
		t.Errorf("dials %v, want one", d)
	}
}

// TestAllowedHostOnlyItsAddresses: an allow-listed host's dial lets
// through only the addresses it resolved to.
func TestAllowedHostOnlyItsAddresses(t *testing.T) {
	t.Parallel()
	ctl := onlyThese("svc.test", []netip.Addr{netip.MustParseAddr("127.0.0.1")})
	if err := ctl("tcp", "127.0.0.1:80", nil); err != nil {
		t.Errorf("resolved address refused: %v", err)
	}
	if err := ctl("tcp", "[::ffff:127.0.0.1]:80", nil); err != nil {
		t.Errorf("mapped form of the resolved address refused: %v", err)
	}
	wantBlocked(t, ctl("tcp", "10.0.0.1:80", nil), "svc.test")
}

// server is an httptest server counting the connections it accepted.
type server struct {
	*httptest.Server
	conns atomic.Int64
}

func newServer(t *testing.T, h http.Handler) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *server) hostport() string { return strings.TrimPrefix(s.URL, "http://") }

func get(t *testing.T, c *http.Client, u string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// TestClientRefusesLoopbackServer: without an allow-list the client does
// not connect to a test server on 127.0.0.1; with one it does.
func TestClientRefusesLoopbackServer(t *testing.T) {
	t.Parallel()
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}))
	g, _ := guardedBy(t, &Guard{})
	c := g.Client(30 * time.Second)
	defer c.CloseIdleConnections()
	_, err := get(t, c, srv.URL)
	wantBlocked(t, err, "127.0.0.1")

	ok, _ := guardedBy(t, &Guard{AllowHosts: []string{srv.hostport()}})
	oc := ok.Client(30 * time.Second)
	defer oc.CloseIdleConnections()
	resp, err := get(t, oc, srv.URL)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("allowed: %v, %v", resp, err)
	}
	// The server accepts in order; the refused request never connected.
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("server saw %d connections, want 1 (the allowed request)", n)
	}
}

// TestRedirects: a redirect from an allowed server to a restricted
// address is refused before any connection, whatever form the target
// takes; redirect chains and schemes are bounded.
func TestRedirects(t *testing.T) {
	t.Parallel()
	other := newAcceptLog(t) // a loopback service that must never be reached
	var hops atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		hops.Add(1)
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := newServer(t, mux)
	res := newResolver(map[string][]string{
		"internal.test": {"10.0.0.1"},
		"localhost":     {"127.0.0.1"},
	})
	g, dials := guardedBy(t, &Guard{AllowHosts: []string{srv.hostport()}, Resolver: res})
	c := g.Client(30 * time.Second)
	defer c.CloseIdleConnections()

	// A redirect that stays on the allowed server works.
	resp, err := get(t, c, srv.URL+"/to?u=/ok")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("redirect to /ok: %v, %v", resp, err)
	}

	blockedTargets := []struct{ target, host string }{
		{"http://" + other.addr() + "/", "127.0.0.1"},
		{"http://localhost:" + other.port() + "/", "localhost"},
		{"http://[::1]:" + other.port() + "/", "::1"},
		{"http://[::ffff:127.0.0.1]:" + other.port() + "/", "::ffff:127.0.0.1"},
		{"http://0.0.0.0:" + other.port() + "/", "0.0.0.0"},
		{"http://10.0.0.1/", "10.0.0.1"},
		{"http://169.254.169.254/latest/meta-data/", "169.254.169.254"},
		{"https://internal.test/admin", "internal.test"},
	}
	for _, tc := range blockedTargets {
		_, err := get(t, c, srv.URL+"/to?u="+url.QueryEscape(tc.target))
		wantBlocked(t, err, tc.host)
	}
	other.proveNoAccept(t)
	for _, d := range dials.dials() {
		if d != srv.hostport() {
			t.Errorf("the guard dialled %s, want only the allowed server %s", d, srv.hostport())
		}
	}

	_, err = get(t, c, srv.URL+"/loop")
	if !errors.Is(err, ErrTooManyRedirects) {
		t.Errorf("redirect loop: %v, want ErrTooManyRedirects", err)
	}
	if n := hops.Load(); n != MaxRedirects+1 {
		t.Errorf("redirect loop: %d requests, want %d", n, MaxRedirects+1)
	}
	if d := classify.Classify(err); d.Class != envelope.ClassPermanent || !strings.Contains(d.Cause, "redirected the request more than 5 times") {
		t.Errorf("redirect loop: %+v", d)
	}

	_, err = get(t, c, srv.URL+"/to?u="+url.QueryEscape("ftp://example.com/file"))
	if !errors.Is(err, ErrRedirectScheme) {
		t.Errorf("redirect to ftp: %v, want ErrRedirectScheme", err)
	}
	if d := classify.Classify(err); d.Class != envelope.ClassPermanent {
		t.Errorf("redirect to ftp: class %s, want permanent", d.Class)
	}
}

func TestTransportHasNoProxy(t *testing.T) {
	t.Parallel()
	tr := (&Guard{}).Transport()
	if tr.Proxy != nil {
		t.Error("Transport uses a proxy: it would connect past the guard")
	}
	if tr.DialContext == nil || tr.DialTLSContext != nil || tr.Dial != nil || tr.DialTLS != nil {
		t.Error("Transport does not dial through the guard only")
	}
}
