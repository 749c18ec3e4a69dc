package discovery

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/natstest"
)

// TestUpdateReannounces: Update rewrites the announcement of a tool whose
// description and schema changed (an MCP server's list_changed), and the
// catalog sees the new definition; a tool the announcer does not announce
// is ignored, and the liveness subject is kept.
func TestUpdateReannounces(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	reg := registry(t, "search")
	a := announce(t, connect(t, srv.ClientURL()), "w1", reg)
	c := newCatalog(t, connect(t, srv.ClientURL()))
	ctx := t.Context()
	eventually(t, "search announced", func() bool { _, ok := c.Lookup(ctx, "search"); return ok })
	before := c.Workers(ctx, "search")[0]

	changed := registry(t, "search", "other")
	rt, _ := changed.Lookup("search")
	rt.Description = "Searches better."
	rt.InputSchema = json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","maxLength":9}}}`)
	other, _ := changed.Lookup("other")
	if err := a.Update(ctx, rt, other); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new description", func() bool {
		defs := c.Definitions(ctx)
		return len(defs) == 1 && defs[0].Description == "Searches better." && strings.Contains(string(defs[0].InputSchema), "maxLength")
	})
	after := c.Workers(ctx, "search")[0]
	if after.Liveness != before.Liveness || !after.StartedAt.Equal(before.StartedAt) {
		t.Errorf("announcement after Update: %+v, before %+v", after, before)
	}
}

// TestAddAndWithdraw: Add announces a tool the worker serves from now on
// (an MCP server added it) and the catalog sees it; Withdraw deletes the
// announcement of a tool it no longer serves, which leaves the catalog,
// while its other tools stay; the heartbeat does not write it back.
func TestAddAndWithdraw(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	a := announce(t, connect(t, srv.ClientURL()), "w1", registry(t, "search"))
	c := newCatalog(t, connect(t, srv.ClientURL()))
	ctx := t.Context()
	eventually(t, "search announced", func() bool { _, ok := c.Lookup(ctx, "search"); return ok })

	more := registry(t, "fetch")
	rt, _ := more.Lookup("fetch")
	if err := a.Add(ctx, rt); err != nil {
		t.Fatal(err)
	}
	eventually(t, "fetch announced", func() bool { _, ok := c.Lookup(ctx, "fetch"); return ok })
	if err := a.Withdraw(ctx, "search", "never-announced"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "search withdrawn", func() bool { _, ok := c.Lookup(ctx, "search"); return !ok })
	if _, ok := c.Lookup(ctx, "fetch"); !ok {
		t.Error("fetch left the catalog with search")
	}
	for key := range a.snapshot() {
		if strings.HasPrefix(key, Key("search", "w1")) {
			t.Errorf("the heartbeat would write %s again", key)
		}
	}
}
