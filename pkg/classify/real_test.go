package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// These tests classify errors produced by real operations on loopback, not
// hand-built ones, so that a change in how the standard library wraps them
// shows up here.

func wantDecision(t *testing.T, err error, class envelope.Class, code string, retryable bool) Decision {
	t.Helper()
	if err == nil {
		t.Fatalf("the operation succeeded; want an error classified %s/%s", class, code)
	}
	d := Classify(err)
	if d.Class != class || d.Code != code || d.Retryable != retryable {
		t.Fatalf("Classify(%v) = %s/%s retryable %v, want %s/%s retryable %v", err, d.Class, d.Code, d.Retryable, class, code, retryable)
	}
	return d
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestRealRefusedDial(t *testing.T) {
	t.Parallel()
	_, err := net.DialTimeout("tcp", closedPort(t), 5*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial to a closed port: %v, want ECONNREFUSED", err)
	}
	wantDecision(t, err, transient, CodeConnRefused, true)
}

func TestRealRefusedHTTPWithSecrets(t *testing.T) {
	t.Parallel()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	_, err := client.Get("http://user:s3cret@" + closedPort(t) + "/x?token=abc")
	d := wantDecision(t, err, transient, CodeConnRefused, true)
	msg := d.Message(MessageInput{Tool: "search_web", Attempts: 3, Exhausted: true})
	for _, bad := range []string{"s3cret", "token", "abc", "user:", "127.0.0.1"} {
		if strings.Contains(d.Cause, bad) || strings.Contains(msg, bad) {
			t.Errorf("%q leaked: cause %q, message %q", bad, d.Cause, msg)
		}
	}
}

func TestRealConnectionReset(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- err
			return
		}
		// Wait until the client is connected and has written, then close
		// with linger 0: close sends RST instead of FIN.
		if _, err := c.Read(make([]byte, 1)); err != nil {
			accepted <- err
			return
		}
		if err := c.(*net.TCPConn).SetLinger(0); err != nil {
			accepted <- err
			return
		}
		accepted <- c.Close()
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after the peer reset: %v, want ECONNRESET", err)
	}
	wantDecision(t, err, transient, CodeConnReset, true)
}

func TestRealReadDeadline(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if c, err := ln.Accept(); err == nil {
			_, _ = io.Copy(io.Discard, c) // until the client closes
			c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(make([]byte, 1))
	c.Close()
	<-done
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	wantDecision(t, err, transient, CodeTimeout, true)
}

// quietServer is an httptest server that does not log TLS handshake errors.
func quietServer(t *testing.T, h http.HandlerFunc, useTLS bool) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(ts.Close)
	return ts
}

func get(t *testing.T, client *http.Client, u string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return client.Do(req)
}

func TestRealTLSUnknownAuthority(t *testing.T) {
	t.Parallel()
	ts := quietServer(t, func(http.ResponseWriter, *http.Request) {}, true)
	tr := &http.Transport{} // trusts the system roots, not the test certificate
	defer tr.CloseIdleConnections()
	_, err := get(t, &http.Client{Transport: tr}, ts.URL)
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
		t.Fatalf("GET with an untrusted certificate: %v, want a certificate verification error", err)
	}
	wantDecision(t, err, permanent, CodeTLS, false)
}

func TestRealTLSHostnameMismatch(t *testing.T) {
	t.Parallel()
	ts := quietServer(t, func(http.ResponseWriter, *http.Request) {}, true)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "wrong.invalid"}}
	defer tr.CloseIdleConnections()
	_, err := get(t, &http.Client{Transport: tr}, ts.URL)
	if _, ok := errors.AsType[x509.HostnameError](err); !ok {
		t.Fatalf("GET with the wrong server name: %v, want a hostname error", err)
	}
	wantDecision(t, err, permanent, CodeTLS, false)
}

func TestRealHTTPClientTimeout(t *testing.T) {
	t.Parallel()
	ts := quietServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}, false)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	_, err := get(t, &http.Client{Transport: tr, Timeout: 50 * time.Millisecond}, ts.URL)
	wantDecision(t, err, transient, CodeTimeout, true)
}

func TestRealHTTPStatuses(t *testing.T) {
	t.Parallel()
	date := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ts := quietServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/busy":
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/limited":
			// A date relative to the response's own Date header.
			w.Header().Set("Date", date.Format(http.TimeFormat))
			w.Header().Set("Retry-After", date.Add(2*time.Minute).Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			http.NotFound(w, r)
		}
	}, false)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	tests := []struct {
		path       string
		class      envelope.Class
		code       string
		retryAfter time.Duration
	}{
		{"/busy", transient, "http_503", 5 * time.Second},
		{"/limited", transient, CodeHTTP429, 2 * time.Minute},
		{"/missing", permanent, "http_404", 0},
	}
	for _, tc := range tests {
		u := strings.Replace(ts.URL, "http://", "http://user:s3cret@", 1) + tc.path + "?token=abc"
		resp, err := get(t, client, u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		he := NewHTTPError(resp)
		if strings.Contains(he.URL, "s3cret") || strings.Contains(he.URL, "token") || strings.Contains(he.Error(), "s3cret") {
			t.Errorf("%s: URL %q / Error %q not sanitized", tc.path, he.URL, he.Error())
		}
		d := wantDecision(t, he, tc.class, tc.code, tc.class == transient)
		if d.RetryAfter != tc.retryAfter {
			t.Errorf("%s: RetryAfter = %v, want %v", tc.path, d.RetryAfter, tc.retryAfter)
		}
	}
}

func TestRealFileErrors(t *testing.T) {
	t.Parallel()
	_, err := os.Open(filepath.Join(t.TempDir(), "missing.txt"))
	if _, ok := errors.AsType[*os.PathError](err); !ok {
		t.Fatalf("open of a missing file: %v, want *fs.PathError", err)
	}
	d := wantDecision(t, err, permanent, CodeNotFound, false)
	if msg := d.Message(MessageInput{Tool: "read_file", Attempts: 1}); strings.Contains(msg, "missing.txt") || strings.Contains(msg, "/") {
		t.Errorf("message shows the local path: %q", msg)
	}
}

func TestRealPanic(t *testing.T) {
	t.Parallel()
	run := func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = &PanicError{Value: v}
			}
		}()
		var m map[string]int
		m["x"] = 1 // panics: assignment to entry in nil map
		return nil
	}
	d := wantDecision(t, run(), internal, CodePanic, false)
	if msg := d.Message(MessageInput{Tool: "t", Attempts: 1}); strings.Contains(msg, "nil map") || strings.Contains(msg, "goroutine") {
		t.Errorf("message shows the panic: %q", msg)
	}
}
