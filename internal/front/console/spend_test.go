package console_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/front/console"
)

// fakeBudgets lists fixed budgets, or fails.
type fakeBudgets struct {
	list []console.BudgetStatus
	fail atomic.Bool
}

func (f *fakeBudgets) List(context.Context) ([]console.BudgetStatus, error) {
	if f.fail.Load() {
		return nil, errors.New("nats: timeout")
	}
	return f.list, nil
}

// budgetRow matches one budget's row: its level class and its cells.
var budgetRowRE = regexp.MustCompile(`(?s)<tr data-budget="([^"]+)" class="budget-(\w+)">(.*?)</tr>`)

// The overview shows each budget's spend (red when exhausted, amber past
// its soft threshold) and this orchestrator's cache outcomes per tool; a
// budget store that fails says so without hiding the rest.
func TestOverviewSpendAndCache(t *testing.T) {
	t.Parallel()
	fb := &fakeBudgets{list: []console.BudgetStatus{
		{Name: "acme-daily", Tenant: "acme", Period: "day", Limit: 100, Spent: 100, Left: 0, ResetIn: 3 * time.Hour},
		{Name: "ci.search", Key: "ci-bot", Tools: []string{"search", "fetch"}, Window: 90 * time.Minute, Limit: 50, Cost: true, Spent: 41, Left: 9, ResetIn: 90 * time.Second},
		{Name: "strict", Tenant: "beta<script>", Period: "hour", Limit: 10, Soft: 1, Spent: 9, Left: 1, ResetIn: time.Minute},
		{Name: "calm", Tenant: "beta", Period: "month", Limit: 1000, Soft: 0.5, Spent: 100, Left: 900, ResetIn: 240 * time.Hour},
	}}
	b := setup(t, func(cfg *console.Config) {
		cfg.Budgets = fb
		cfg.Refresh = time.Nanosecond // read again at every request
		cfg.CacheCounts = func() []console.CacheCount {
			return []console.CacheCount{{Tool: "search", Hit: 12, Miss: 3, Coalesced: 4, Bypass: 1}, {Tool: "idle"}}
		}
	})
	c, _ := b.loggedIn(t)
	_, page := b.get(t, c, "/ui/overview.frag")
	got := map[string]string{}
	for _, m := range budgetRowRE.FindAllStringSubmatch(page, -1) {
		got[m[1]] = m[2] + " | " + strings.Join(strings.Fields(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[3], " ")), " ")
	}
	want := map[string]string{
		"acme-daily": "exhausted | acme-daily tenant acme every tool per day 100 / 100 calls 0 3h",
		"ci.search":  "nearly | ci.search key ci-bot search, fetch per rolling 1h30m 41 / 50 cost units 9 1m30s",
		"strict":     "ok | strict tenant beta&lt;script&gt; every tool per hour 9 / 10 calls 1 1m",
		"calm":       "ok | calm tenant beta every tool per month 100 / 1000 calls 900 240h",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("budget %s: %q\n                want %q", name, got[name], w)
		}
	}
	if !strings.Contains(page, `<td class="n cache"><span title="coalesced 4, bypass 1">12 / 3</span></td>`) {
		t.Errorf("the overview lacks search's cache counts:\n%s", page)
	}
	if strings.Contains(page, `data-tool="idle"`) {
		t.Error("a tool with no cache outcome got a row")
	}

	fb.fail.Store(true)
	_, page = b.get(t, c, "/ui/overview.frag")
	if !strings.Contains(page, "The budgets cannot be read: nats: timeout") || !strings.Contains(page, `id="tools"`) {
		t.Errorf("with the budgets failing the overview shows:\n%s", page)
	}
}
