package httpapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/infra/startstop"
)

func newLifecycleServer(t *testing.T, addr string) *Server {
	t.Helper()
	srv, err := NewServer(ServerConfig{Addr: addr, Loopback: true, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// Start binds the address before it returns and serves until Stop; a
// second start is refused; Stop closes Stopped and ends the serving.
func TestServerStartStop(t *testing.T) {
	t.Parallel()
	srv := newLifecycleServer(t, "127.0.0.1:0")
	if err := srv.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if srv.Addr() == "" {
		t.Fatal("no address after Start")
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + srv.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if err := srv.Start(t.Context()); !errors.Is(err, startstop.ErrStarted) {
		t.Errorf("a second Start: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ln); !errors.Is(err, startstop.ErrStarted) {
		t.Errorf("Serve after Start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	select {
	case <-srv.Stopped():
	default:
		t.Error("Stopped is open after Stop")
	}
	if err := srv.Ready(ctx); err == nil {
		t.Error("ready after Stop")
	}
	if _, err := client.Get("http://" + srv.Addr() + "/"); err == nil {
		t.Error("still serving after Stop")
	}
}

// A server stopped before it started is not ready, and then neither
// starts nor serves: Serve returns http.ErrServerClosed.
func TestServerStopBeforeStart(t *testing.T) {
	t.Parallel()
	srv := newLifecycleServer(t, "127.0.0.1:0")
	if err := srv.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := srv.Ready(context.Background()); err == nil {
		t.Error("ready after Stop")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve after Stop: %v", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Error("the listener given to Serve after Stop is still open")
	}
	if err := srv.Start(context.Background()); err == nil {
		t.Error("Start after Stop succeeded")
	}
}

// Start without an address, or on one that cannot be bound, fails.
func TestServerStartErrors(t *testing.T) {
	t.Parallel()
	if err := newLifecycleServer(t, "").Start(t.Context()); err == nil {
		t.Error("Start without an address succeeded")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := newLifecycleServer(t, ln.Addr().String())
	if err := srv.Start(t.Context()); err == nil {
		t.Error("Start on a bound address succeeded")
	}
	if err := srv.Stop(context.Background()); err != nil {
		t.Errorf("Stop after a failed Start: %v", err)
	}
}
