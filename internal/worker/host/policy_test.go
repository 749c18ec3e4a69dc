package host_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/worker/host"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/builtin"
)

// A host announces the cost, cache and approval rule its catalog file
// gives its tools (a builtin entry's laid over the built-in tool), and an
// orchestrator's live catalog answers them with the tool's version.
func TestHostAnnouncesPolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "tools.yaml")
	yaml := "tools:\n" +
		"  - name: shout\n    description: Shouts.\n    input_schema: {type: object}\n    idempotent: true\n" +
		"    cost: 4\n    cache: {ttl: 10m, scope: global}\n    backend: exec\n    exec: {command: [tr, a-z, A-Z]}\n" +
		"  - name: write_file\n    backend: builtin\n    approval: {when: {input.path: \"secrets/**\"}, timeout: 1h}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cat, err := host.LoadCatalog(host.CatalogConfig{Path: file, Builtin: builtin.Config{Workspace: filepath.Join(dir, "ws")}})
	if err != nil {
		t.Fatal(err)
	}
	srv, _, _ := natstest.StartProvisioned(t)
	h, err := host.New(host.Config{Conn: natstest.Connect(t, srv.ClientURL()), Catalog: cat, NoHistory: true, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(context.Background()) })

	j, err := js.New(natstest.Connect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: j, Logger: natstest.Logger(t)})
	if err == nil {
		err = live.Start(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Stop(context.Background()) })
	natstest.Eventually(t, 30*time.Second, "both tools announced", func() bool {
		_, a := live.Lookup(ctx, "shout")
		_, b := live.Lookup(ctx, "write_file")
		return a && b
	})
	shout, _ := live.Lookup(ctx, "shout")
	if shout.Cost != 4 || shout.Cache == nil || *shout.Cache != (tools.CachePolicy{TTL: 10 * time.Minute, Scope: tools.CacheScopeGlobal}) ||
		shout.Approval != nil || len(shout.Version) != 16 {
		t.Errorf("shout: %+v", shout)
	}
	wf, _ := live.Lookup(ctx, "write_file")
	if wf.Cost != 0 || wf.Cache != nil || wf.Approval == nil || wf.Approval.Timeout != time.Hour ||
		len(wf.Approval.When) != 1 || wf.Approval.When[0] != (tools.ApprovalMatch{Field: "input.path", Pattern: "secrets/**"}) {
		t.Errorf("write_file: %+v (approval %+v)", wf, wf.Approval)
	}
	if wf.Version == shout.Version {
		t.Errorf("two tools share the version %s", wf.Version)
	}
}
