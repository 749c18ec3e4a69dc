package cluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/tools"
)

// The approvals under accounts.conf: the orchestrator user creates the
// bucket, holds a call and waits for it; the ops user (orchestrator
// approvals ls|show|approve|deny) lists, shows and decides it; the
// orchestrator's Wait gets the decision; a worker may not read it.
func TestApprovalPermissions(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "120s")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	oj, err := js.New(c.connect(t, "orchestrator", orchPassword))
	if err != nil {
		t.Fatal(err)
	}
	orch, err := approval.New(approval.Config{JS: oj, Replicas: 3, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := orch.Start(ctx); err != nil {
		t.Fatalf("orchestrator creates and watches the approvals bucket: %v", err)
	}
	defer func() { _ = orch.Stop(context.Background()) }()
	d, err := orch.Hold(ctx, &policy.Call{
		Tenant: "acme", Session: "s", ID: "toolu_perm", Tool: "write_file", Input: json.RawMessage(`{"path":"/etc/hosts"}`),
		Info: pooltype.ToolInfo{Approval: &tools.ApprovalRule{}},
	})
	if err != nil {
		t.Fatalf("orchestrator holds a call: %v", err)
	}
	waited := make(chan policy.Decision, 1)
	go func() {
		got, err := orch.Wait(ctx, d.ID)
		if err != nil {
			t.Errorf("orchestrator waits: %v", err)
		}
		waited <- got
	}()

	opsJS, err := js.New(c.connect(t, "ops", opsPassword))
	if err != nil {
		t.Fatal(err)
	}
	ops, err := approval.Open(ctx, approval.Config{JS: opsJS, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatalf("ops opens the approvals bucket: %v", err)
	}
	// The list is a watch of the bucket (an ordered consumer), which may
	// be served by a replica that has not applied the Hold yet: it listed
	// nothing, without error, once in a run of the package. An empty list
	// is asked for again until ctx ends; a refusal or any other list fails
	// at once.
	list, err := ops.List(ctx, true)
	for err == nil && len(list) == 0 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		list, err = ops.List(ctx, true)
	}
	if err != nil || len(list) != 1 || list[0].ID != d.ID {
		t.Fatalf("ops lists the approvals: %+v, %v", list, err)
	}
	if _, err := ops.Get(ctx, d.ID); err != nil {
		t.Fatalf("ops shows an approval: %v", err)
	}
	if _, err := ops.Decide(ctx, d.ID, true, "alice", "", approval.ViaCLI); err != nil {
		t.Fatalf("ops decides: %v", err)
	}
	select {
	case got := <-waited:
		if got.State != policy.Approved || got.By != "alice" {
			t.Fatalf("the orchestrator's Wait = %+v", got)
		}
	case <-ctx.Done():
		t.Fatal("the orchestrator's Wait never saw the decision")
	}

	wj, short := c.untilRefused(t, "worker", workerPassword, 10*time.Second)
	if kv, err := wj.KeyValue(short, approval.BucketDefault); err == nil {
		if _, err := kv.Get(short, d.ID); err == nil {
			t.Error("a worker read an approval")
		}
	}
}
