package toolpool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/natstest"
	tpjs "github.com/toolpool/toolpool/jetstream"
)

// A Server's tools change while it runs: Serve before Start registers a
// tool that Start then serves, Unserve before Start leaves a tool out;
// after Start, Serve makes every worker pull a tool and announces it (the
// live catalog lists it, calls reach it, its metrics have its label), and
// Unserve withdraws it from the catalog and every worker's pulls.
func TestServerServesAndUnservesAtRuntime(t *testing.T) {
	t.Parallel()
	p := setup(t)
	echo := func(name string) toolpool.Tool {
		return toolpool.Tool{
			Name: name, Description: "Echoes.", InputSchema: json.RawMessage(`{"type":"object"}`),
			Handler: func(context.Context, json.RawMessage) (toolpool.Output, error) { return toolpool.Text(name), nil },
		}
	}
	srv, err := toolpool.NewServer(toolpool.ServerConfig{Conn: p.nc, Registry: p.reg, Workers: 2, NoHistory: true, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Serve(ctx, echo("early")); err != nil {
		t.Fatalf("Serve before Start: %v", err)
	}
	if err := srv.Unserve(ctx, "hold"); err != nil {
		t.Fatalf("Unserve before Start: %v", err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	orch, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: p.nc, NoPoisonWatcher: true, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := orch.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = orch.Stop(context.Background()) })
	listed := func() []string {
		var names []string
		for _, d := range orch.Definitions(ctx) {
			names = append(names, d.Name)
		}
		slices.Sort(names)
		return names
	}
	serving := func(want ...string) {
		t.Helper()
		for _, w := range srv.Workers() {
			if got := w.Serving(); !slices.Equal(got, want) {
				t.Fatalf("worker %s serves %v, want %v", w.ID(), got, want)
			}
		}
	}
	calls := 0
	call := func(name string) toolpool.Result {
		t.Helper()
		calls++ // an id of its own: a stored result answers an id seen before
		res, err := orch.Dispatch(ctx, "s", []toolpool.ToolUse{{ID: fmt.Sprintf("toolu_%s_%d", name, calls), Name: name, Input: json.RawMessage(`{}`)}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	waitListed(t, listed, "early")
	serving("early")

	if err := srv.Serve(ctx, echo("late")); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	serving("early", "late")
	waitListed(t, listed, "early", "late")
	if res := call("late"); res.IsError || res.Content.Text() != "late" {
		t.Fatalf("late: %+v", res)
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	// A tool's series exist from when it gets its label: without one it
	// would be counted as the unknown tool.
	if !strings.Contains(string(body), `toolpool_worker_panics_total{tool="late"} 0`) {
		t.Errorf("/metrics lacks the late tool's own label:\n%s", body)
	}

	if err := srv.Unserve(ctx, "early"); err != nil {
		t.Fatalf("Unserve: %v", err)
	}
	serving("late")
	waitListed(t, listed, "late")
	if err := srv.Serve(ctx, echo("early"), echo("hold")); err != nil { // in the registry already: served as registered
		t.Fatalf("Serve again: %v", err)
	}
	serving("early", "hold", "late")
	waitListed(t, listed, "early", "hold", "late")
	if res := call("early"); res.IsError || res.Content.Text() != "early" {
		t.Fatalf("early served again: %+v", res)
	}
	if got := p.reg.Names(); !slices.Equal(got, []string{"early", "hold", "late"}) {
		t.Errorf("registry: %v", got)
	}
}

// waitListed waits until listed says want, failing after a generous bound;
// a timeout logs what it listed last.
func waitListed(t *testing.T, listed func() []string, want ...string) {
	t.Helper()
	var got []string
	defer func() {
		if !slices.Equal(got, want) {
			t.Logf("the live catalog lists %v, want %v", got, want)
		}
	}()
	natstest.Eventually(t, 30*time.Second, fmt.Sprintf("the live catalog to list %v", want), func() bool {
		got = listed()
		return slices.Equal(got, want)
	})
}

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
	// The pull loop of late ends when its consumer goes; readiness says so.
	if err := js.DeleteConsumer(ctx, tpjs.StreamCalls, tpjs.ConsumerName("late")); err != nil {
		t.Fatal(err)
	}
	if code, body := ready(); code != 503 || !strings.Contains(body, tpjs.ConsumerName("late")) {
		t.Fatalf("/readyz without the consumer of a served tool: %d %s, want 503 naming %s", code, body, tpjs.ConsumerName("late"))
	}
	if err := srv.Unserve(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	if code, body := ready(); code != 200 {
		t.Fatalf("/readyz after Unserve of the tool without a consumer: %d %s, want 200", code, body)
	}
}
