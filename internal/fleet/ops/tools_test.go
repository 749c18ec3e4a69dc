package ops_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/tools"
)

// A worker serving echo, announced: LiveTools lists it with its worker.
func TestLiveTools(t *testing.T) {
	t.Parallel()
	_, nc, j := natstest.StartProvisioned(t)
	reg := tools.NewRegistry()
	if err := reg.Register(tools.Tool{
		Name: "echo", Description: "echoes text",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Timeout:     5 * time.Second,
		Idempotent:  true,
		Cost:        3,
		Cache:       &tools.CachePolicy{TTL: time.Minute},
		Approval:    &tools.ApprovalRule{When: []tools.ApprovalMatch{{Field: "input.text", Pattern: "rm *"}}},
		Handler: func(_ context.Context, input json.RawMessage) (tools.Output, error) {
			var in struct{ Text string }
			_ = json.Unmarshal(input, &in)
			return tools.Text(in.Text), nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	pooltest.StartServer(t, nc.ConnectedUrl(), reg, func(c *pooltest.ServerConfig) { c.NoAnnounce = false; c.Worker.WorkerID = "w-ops" })

	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Logger: natstest.Logger(t)})
	if err == nil {
		err = live.Start(ctxFor(t))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer live.Stop(context.Background())
	var lt []ops.LiveTool
	natstest.Eventually(t, waitLong, "echo in the live catalog", func() bool {
		lt = ops.LiveTools(ctxFor(t), live)
		return len(lt) == 1
	})
	if lt[0].Name != "echo" || len(lt[0].Workers) != 1 || lt[0].Workers[0].WorkerID != "w-ops" || lt[0].Workers[0].Timeout != "5s" {
		t.Errorf("live tools = %+v", lt)
	}
	if e := lt[0]; e.Cost != 3 || e.Cache == nil || e.Cache.TTL != time.Minute || e.Approval == nil ||
		len(e.Approval.When) != 1 || len(e.Version) != 16 {
		t.Errorf("echo's policy: cost %d, cache %+v, approval %+v, version %q", e.Cost, e.Cache, e.Approval, e.Version)
	}
}
