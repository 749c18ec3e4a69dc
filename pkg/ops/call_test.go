package ops_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/pkg/discovery"
	"github.com/toolpool/toolpool/pkg/ops"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/worker"
)

// A worker serving echo, announced: LiveTools lists it with its worker,
// and Call runs one call through it; an unknown tool is an is_error
// result, not an error.
func TestCallAndLiveTools(t *testing.T) {
	t.Parallel()
	_, _, j := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	if err := reg.Register(tools.Tool{
		Name: "echo", Description: "echoes text",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Timeout:     5 * time.Second,
		Handler: func(_ context.Context, input json.RawMessage) (tools.Output, error) {
			var in struct{ Text string }
			_ = json.Unmarshal(input, &in)
			return tools.Text(in.Text), nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(worker.Config{JetStream: j, Registry: reg, Logger: natstest.Logger(t), DrainTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(ctxFor(t)) })
	a, err := discovery.NewAnnouncer(discovery.AnnouncerConfig{JetStream: j, Registry: reg, WorkerID: "w-ops", Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop(ctxFor(t)) })

	live, err := discovery.NewCatalog(ctxFor(t), discovery.CatalogConfig{JetStream: j, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	var lt []ops.LiveTool
	natstest.Eventually(t, waitLong, "echo in the live catalog", func() bool {
		lt = ops.LiveTools(ctxFor(t), live)
		return len(lt) == 1
	})
	if lt[0].Name != "echo" || len(lt[0].Workers) != 1 || lt[0].Workers[0].WorkerID != "w-ops" || lt[0].Workers[0].Timeout != "5s" {
		t.Errorf("live tools = %+v", lt)
	}

	cfg := ops.CallConfig{JetStream: j, Logger: natstest.Logger(t), Session: "s1"}
	res, err := ops.Call(ctxFor(t), cfg, "echo", json.RawMessage(`{"text":"hi"}`))
	if err != nil || res.IsError || res.Type != "tool_result" || len(res.Content) != 1 || res.Content[0].Text != "hi" {
		t.Errorf("Call(echo) = %+v, %v", res, err)
	}
	res, err = ops.Call(ctxFor(t), cfg, "nope", json.RawMessage(`{}`))
	if err != nil || !res.IsError {
		t.Errorf("Call(nope) = %+v, %v; want an is_error result", res, err)
	}
	if _, err := ops.Call(ctxFor(t), ops.CallConfig{}, "echo", nil); err == nil {
		t.Error("Call without JetStream: no error")
	}
}
