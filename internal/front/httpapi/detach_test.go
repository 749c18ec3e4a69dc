package httpapi

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
)

// A request still in flight when the drain runs out ends with the cause
// dispatch.ErrDetached, not a plain cancellation, so the dispatcher leaves
// its calls running (issue 23): a caller that goes away would have
// cancelled them.
func TestDrainTimeoutDetachesRequests(t *testing.T) {
	t.Parallel()
	entered, cause := make(chan struct{}, 1), make(chan error, 1)
	b := startServer(t, func(c *ServerConfig) {
		c.Handler = http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			<-r.Context().Done()
			cause <- context.Cause(r.Context())
		})
	})
	// The request ends with the drain (its connection closed): its error
	// is expected, and is not the test's (b.get would fail the test from
	// this goroutine, after the test ended).
	got := make(chan struct{})
	go func() {
		defer close(got)
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		if resp, err := client.Get(b.base + "/calls"); err == nil {
			resp.Body.Close()
		}
	}()
	defer func() { <-got }()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = b.srv.Stop(ctx)
	select {
	case err := <-cause:
		if !errors.Is(err, dispatch.ErrDetached) {
			t.Errorf("the request's cause: %v; want dispatch.ErrDetached", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request in flight was not ended by the drain's end")
	}
}
