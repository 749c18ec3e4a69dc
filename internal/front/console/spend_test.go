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
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
)

// fakeBudgets lists fixed budgets, or fails.
type fakeBudgets struct {
	list []budget.Status
	fail atomic.Bool
}

func (f *fakeBudgets) List(context.Context) ([]budget.Status, error) {
	if f.fail.Load() {
		return nil, errors.New("nats: timeout")
	}
	return f.list, nil
}

// budgetRowRE matches one budget's row: its name, level class and cells.
var (
	budgetRowRE = regexp.MustCompile(`(?s)<tr data-budget="([^"]+)" class="budget-(\w+)">(.*?)</tr>`)
	tagRE       = regexp.MustCompile(`<[^>]+>`)
)

// budgetRows reads the budgets' rows of an overview: name → "level |
// cells".
func budgetRows(page string) map[string]string {
	got := map[string]string{}
	for _, m := range budgetRowRE.FindAllStringSubmatch(page, -1) {
		got[m[1]] = m[2] + " | " + strings.Join(strings.Fields(tagRE.ReplaceAllString(m[3], " ")), " ")
	}
	return got
}

// The overview shows each budget's spend (red when exhausted, amber past
// its soft threshold) and this orchestrator's cache outcomes per tool; a
// budget store that fails says so without hiding the rest.
func TestOverviewSpendAndCache(t *testing.T) {
	t.Parallel()
	fb := &fakeBudgets{list: []budget.Status{
		{Def: budget.Def{Name: "acme-daily", Tenant: "acme", Period: budget.Day, Limit: 100}, Spent: 100, Left: 0, ResetIn: 3 * time.Hour},
		{Def: budget.Def{Name: "ci.search", Key: "ci-bot", Tools: []string{"search", "fetch"}, Window: 90 * time.Minute, Limit: 50, Cost: true},
			Spent: 41, Left: 9, ResetIn: 90 * time.Second},
		{Def: budget.Def{Name: "strict", Tenant: "beta<script>", Period: budget.Hour, Limit: 10, Soft: 1}, Spent: 9, Left: 1, ResetIn: time.Minute},
		{Def: budget.Def{Name: "calm", Tenant: "beta", Period: budget.Month, Limit: 1000, Soft: 0.5}, Spent: 100, Left: 900, ResetIn: 240 * time.Hour},
	}}
	b := setup(t, func(cfg *console.Config) {
		cfg.Budgets = fb
		cfg.Refresh = time.Nanosecond // read again at every request
		m, err := metrics.NewCache(metrics.NewRegistry(), metrics.CacheOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for outcome, n := range map[string]int{"hit": 12, "miss": 3, "coalesced": 4, "bypass": 1} {
			for range n {
				m.Outcome("search", outcome)
			}
		}
		m.Outcome("idle", "nonsense") // a row of zeros: no cache column entry
		cfg.CacheCounts = m.ByTool
	})
	c, _ := b.loggedIn(t)
	_, page := b.get(t, c, "/ui/overview.frag")
	got := budgetRows(page)
	want := map[string]string{
		"acme-daily": "exhausted | acme-daily tenant acme every tool per day 100 / 100 calls 0 3h",
		"ci.search":  "nearly | ci.search key ci-bot search, fetch per rolling 90m 41 / 50 cost units 9 1m30s",
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

// With the real budget store, fleet-wide spending shows on the overview
// as the calls are charged: amber past the soft threshold, red once spent.
func TestOverviewBudgetsFromTheStore(t *testing.T) {
	t.Parallel()
	var st *budget.Store
	b := setup(t, func(cfg *console.Config) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := budget.Set(ctx, cfg.JetStream, budget.Def{Name: "acme-daily", Tenant: "acme", Period: budget.Day, Limit: 4}); err != nil {
			t.Fatal(err)
		}
		s, err := budget.New(budget.Config{JS: cfg.JetStream, Logger: cfg.Logger})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
		m, err := metrics.NewCache(metrics.NewRegistry(), metrics.CacheOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st, cfg.Budgets, cfg.Refresh, cfg.CacheCounts = s, s, time.Nanosecond, m.ByTool
	})
	c, _ := b.loggedIn(t)
	natstest.Eventually(t, time.Minute, "the store to know the budget", func() bool { return st.Active("acme", "") })
	charge := func(n int) {
		t.Helper()
		for range n {
			if _, err := st.Charge(context.Background(), &policy.Call{Tenant: "acme", Tool: "echo", Info: pooltype.ToolInfo{Cost: 1}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	row := func() string {
		_, page := b.get(t, c, "/ui/overview.frag")
		return budgetRows(page)["acme-daily"]
	}
	if _, page := b.get(t, c, "/ui/overview.frag"); strings.Contains(page, "cache hit / miss") {
		t.Error("the overview shows a cache column while no call went through the cache")
	}
	if r := row(); !strings.HasPrefix(r, "ok | acme-daily tenant acme every tool per day 0 / 4 calls 4 ") {
		t.Errorf("before any call: %q", r)
	}
	charge(4) // 4 of 4: past the soft 80 %, and spent
	if r := row(); !strings.HasPrefix(r, "exhausted | acme-daily tenant acme every tool per day 4 / 4 calls 0 ") {
		t.Errorf("after 4 calls: %q", r)
	}
}
