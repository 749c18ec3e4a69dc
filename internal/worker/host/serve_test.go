package host_test

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

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/worker/host"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// A host's tools change while it runs: Serve before Start registers a
// tool that Start then serves, Unserve before Start leaves a tool out;
// after Start, Serve makes every worker pull a tool and announces it (the
// live catalog lists it, calls reach it, its metrics have its label), and
// Unserve withdraws it from the catalog and every worker's pulls.
func TestHostServesAndUnservesAtRuntime(t *testing.T) {
	t.Parallel()
	srv0, nc, _ := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	echo := func(name string) tools.Tool {
		return tools.Tool{
			Name: name, Description: "Echoes.", InputSchema: json.RawMessage(`{"type":"object"}`),
			Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text(name), nil },
		}
	}
	reg.MustRegister(echo("hold"))
	srv, err := host.New(host.Config{Conn: natstest.Connect(t, srv0.ClientURL()), Registry: reg, Workers: 2, NoHistory: true, Logger: natstest.Logger(t)})
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
	orch := pooltest.StartOrchestrator(t, nc, nil) // the live catalog
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
	call := func(name string) envelope.Result {
		t.Helper()
		calls++ // an id of its own: a stored result answers an id seen before
		res, err := orch.Dispatch(ctx, "s", []envelope.ToolUseBlock{{ID: fmt.Sprintf("toolu_%s_%d", name, calls), Name: name, Input: json.RawMessage(`{}`)}})
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
	if got := reg.Names(); !slices.Equal(got, []string{"early", "hold", "late"}) {
		t.Errorf("registry: %v", got)
	}
}

// waitListed waits until listed says want, failing after a generous bound.
func waitListed(t *testing.T, listed func() []string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for got := listed(); !slices.Equal(got, want); got = listed() {
		if time.Now().After(deadline) {
			t.Fatalf("the live catalog lists %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReadyAtOnceAfterStart: a /readyz probe before Start (a supervisor
// probing a worker process that is still starting) used to leave the
// consumers check's "consumer not found" cached for a refresh interval
// (5 s), so the host said not ready for that long after it was. Now the
// first probe after Start answers ready.
func TestReadyAtOnceAfterStart(t *testing.T) {
	t.Parallel()
	srv0, _, _ := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	reg.MustRegister(tools.Tool{
		Name: "ready_echo", Description: "Echoes.", InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("hi"), nil },
	})
	h, err := host.New(host.Config{Conn: natstest.Connect(t, srv0.ClientURL()), Registry: reg, NoHistory: true, NoAnnounce: true, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h.Handler())
	defer hs.Close()
	readyz := func() (int, string) {
		t.Helper()
		resp, err := hs.Client().Get(hs.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := readyz(); code != 503 {
		t.Fatalf("/readyz before Start: %d %s; want 503", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	if code, body := readyz(); code != 200 {
		t.Errorf("/readyz right after Start: %d %s; want 200", code, body)
	}
}
