package toolpool_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/natstest"
	tpjs "github.com/toolpool/toolpool/jetstream"
)

// A Server's readiness checks the consumers of the tools it serves at the
// time of the probe: a tool served after the handler was made is checked,
// one withdrawn by Unserve is not.
func TestServerReadinessFollowsServedTools(t *testing.T) {
	t.Parallel()
	p := setup(t)
	srv, err := toolpool.NewServer(toolpool.ServerConfig{Conn: p.nc, Registry: p.reg, NoHistory: true, NoAnnounce: true, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	h := srv.Handler() // made before the tools change
	ready := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := ready(); code != 200 {
		t.Fatalf("/readyz at start: %d %s", code, body)
	}
	js, err := jetstream.New(p.nc)
	if err != nil {
		t.Fatal(err)
	}
	late := toolpool.Tool{
		Name: "late", Description: "Echoes.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, json.RawMessage) (toolpool.Output, error) { return toolpool.Text("late"), nil },
	}
	if err := srv.Serve(ctx, late); err != nil {
		t.Fatal(err)
	}
	// Readiness checks the consumer of a tool served after Start. The
	// worker makes a deleted consumer again within milliseconds, so the
	// consumer is deleted over and over until a probe sees it missing.
	deleting, stopDeleting := context.WithCancel(ctx)
	deleted := make(chan struct{})
	go func() {
		defer close(deleted)
		for deleting.Err() == nil {
			_ = js.DeleteConsumer(deleting, tpjs.StreamCalls, tpjs.ConsumerName("late"))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	var code int
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if code, body = ready(); code == 503 && strings.Contains(body, tpjs.ConsumerName("late")) {
			break
		}
	}
	stopDeleting()
	<-deleted
	if code != 503 || !strings.Contains(body, tpjs.ConsumerName("late")) {
		t.Fatalf("/readyz without the consumer of a served tool: %d %s, want 503 naming %s", code, body, tpjs.ConsumerName("late"))
	}
	if err := srv.Unserve(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	if code, body := ready(); code != 200 {
		t.Fatalf("/readyz after Unserve of the tool without a consumer: %d %s, want 200", code, body)
	}
}
