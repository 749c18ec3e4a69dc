package discovery

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/tools"
)

// TestRegistryCatalogFairShares: a registry's catalog gives each tool its
// fairness key, per-key limits and slots: its concurrency, capped by the
// workers' slots when they are known.
func TestRegistryCatalogFairShares(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	nop := func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("ok"), nil }
	reg.MustRegister(tools.Tool{Name: "review", InputSchema: json.RawMessage(`{"type":"object"}`), Handler: nop,
		Concurrency: 64, Fairness: "input.repo", PerKey: tools.KeyLimits{Concurrency: 8, Rate: 50}})
	reg.MustRegister(tools.Tool{Name: "plain", InputSchema: json.RawMessage(`{"type":"object"}`), Handler: nop})
	ctx := context.Background()
	limits := tools.KeyLimits{Concurrency: 8, Rate: 50, Per: time.Second, Burst: 50}
	for _, tc := range []struct {
		name    string
		c       pooltype.Catalog
		tool    string
		want    pooltype.ToolInfo
		comment string
	}{
		{"unknown slots", RegistryCatalog(reg), "review", pooltype.ToolInfo{Name: "review", Slots: 64, Fairness: "input.repo", PerKey: limits}, "the tool's concurrency"},
		{"default concurrency", RegistryCatalog(reg), "plain", pooltype.ToolInfo{Name: "plain", Slots: tools.ConcurrencyDefault}, "the default concurrency"},
		{"fewer worker slots", RegistryCatalogWithSlots(reg, 16), "review", pooltype.ToolInfo{Name: "review", Slots: 16, Fairness: "input.repo", PerKey: limits}, "the workers' 16"},
		{"more worker slots", RegistryCatalogWithSlots(reg, 4*256), "review", pooltype.ToolInfo{Name: "review", Slots: 64, Fairness: "input.repo", PerKey: limits}, "capped by 64"},
		{"no slots given", RegistryCatalogWithSlots(reg, 0), "plain", pooltype.ToolInfo{Name: "plain", Slots: tools.ConcurrencyDefault}, "as RegistryCatalog"},
	} {
		info, ok := tc.c.Lookup(ctx, tc.tool)
		if !ok || info != tc.want {
			t.Errorf("%s: Lookup(%s) = %+v, %v; want %+v (%s)", tc.name, tc.tool, info, ok, tc.want, tc.comment)
		}
	}
}
