package budget_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
)

// chargeMany charges calls from both replicas at once, from many
// goroutines each, and counts the calls admitted; every refusal must be a
// *policy.Exhausted.
func chargeMany(t *testing.T, rs []*replica, calls int, c *policy.Call) (admitted int64, refused []*policy.Exhausted) {
	t.Helper()
	var (
		n  atomic.Int64
		mu sync.Mutex
		wg sync.WaitGroup
	)
	per := calls / (len(rs) * 8)
	for _, r := range rs {
		for range 8 {
			wg.Go(func() {
				for range per {
					_, err := r.Charge(context.Background(), c)
					var ex *policy.Exhausted
					switch {
					case err == nil:
						n.Add(1)
					case errors.As(err, &ex):
						mu.Lock()
						refused = append(refused, ex)
						mu.Unlock()
					default:
						t.Errorf("charge: %v", err)
					}
				}
			})
		}
	}
	wg.Wait()
	return n.Load(), refused
}

func TestTwoReplicasAdmitExactlyTheLimit(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a, b := f.replica(t, nil), f.replica(t, nil)
	f.set(t, budget.Def{Name: "acme.daily", Tenant: "acme", Period: budget.Day, Limit: 100}, a, b)

	admitted, refused := chargeMany(t, []*replica{a, b}, 320, call("acme", "", "search", 5))
	if admitted != 100 || len(refused) != 220 {
		t.Fatalf("admitted %d, refused %d; want exactly 100 and 220", admitted, len(refused))
	}
	ex := refused[0].Budget
	if ex.Name != "acme.daily" || ex.Tool != "search" || ex.Limit != 100 || ex.Spent != 100 || ex.Cost ||
		ex.Period != "per day" || ex.ResetIn <= 0 || ex.ResetIn > 24*time.Hour {
		t.Errorf("exhausted = %+v", ex)
	}
	if got := a.metrics.refusedOf("acme.daily") + b.metrics.refusedOf("acme.daily"); got != 220 {
		t.Errorf("refusals counted %d, want 220", got)
	}
	st, err := budget.ListStatus(t.Context(), f.js, time.Now())
	if err != nil || len(st) != 1 || st[0].Spent != 100 || st[0].Left != 0 {
		t.Fatalf("ListStatus = %+v, %v; want 100 spent, 0 left", st, err)
	}

	// a reset gives room again, to both replicas
	if err := budget.Reset(t.Context(), f.js, "acme.daily", time.Now()); err != nil {
		t.Fatal(err)
	}
	admitted, _ = chargeMany(t, []*replica{a, b}, 64, call("acme", "", "search", 1))
	if admitted != 64 {
		t.Errorf("after the reset, admitted %d of 64", admitted)
	}
	if d := mustGet(t, f, "acme.daily"); d.ResetAt.IsZero() {
		t.Error("the reset is not stamped on the definition")
	}
}

func TestCostUnits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a, b := f.replica(t, nil), f.replica(t, nil)
	f.set(t, budget.Def{Name: "units", Tenant: "acme", Period: budget.Hour, Limit: 100, Cost: true, Soft: 1}, a, b)

	// 7 units a call: 14 calls (98 units) fit, the 15th would pass 100
	admitted, refused := chargeMany(t, []*replica{a, b}, 64, call("acme", "", "search", 7))
	if admitted != 14 {
		t.Fatalf("admitted %d calls of 7 units under 100; want 14", admitted)
	}
	if len(refused) != 64-14 {
		t.Fatalf("refused %d", len(refused))
	}
	// settled (no charge in flight), the refusal tells what is spent
	_, err := a.Charge(t.Context(), call("acme", "", "search", 7))
	var ex *policy.Exhausted
	if !errors.As(err, &ex) || !ex.Budget.Cost || ex.Budget.Spent != 98 || ex.Budget.Period != "per hour" {
		t.Errorf("exhausted = %v %+v", err, ex)
	}
	// a call of 2 units still fits; a call of cost 0 counts 1
	if _, err := a.Charge(t.Context(), call("acme", "", "search", 2)); err != nil {
		t.Fatalf("2 units: %v", err)
	}
	if _, err := a.Charge(t.Context(), call("acme", "", "search", 0)); err == nil {
		t.Fatal("a call of cost 0 (1 unit) was admitted over the limit")
	}
}

func TestPeriodRollsOver(t *testing.T) {
	t.Parallel()
	f := setup(t)
	clk := newClock(time.Date(2026, 3, 31, 23, 59, 30, 0, time.UTC))
	a := f.replica(t, clk.Now)
	f.set(t, budget.Def{Name: "m", Tenant: "t", Period: budget.Minute, Limit: 3}, a)
	f.set(t, budget.Def{Name: "mo", Tenant: "t", Period: budget.Month, Limit: 5}, a)
	c := call("t", "", "echo", 1)
	for i := range 3 {
		if _, err := a.Charge(t.Context(), c); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	_, err := a.Charge(t.Context(), c)
	var ex *policy.Exhausted
	if !errors.As(err, &ex) || ex.Budget.Name != "m" || ex.Budget.ResetIn != 30*time.Second || ex.Budget.Period != "per minute" {
		t.Fatalf("4th call: %v (%+v); want budget m, room again in 30s", err, ex)
	}
	// the refused call spent nothing of "mo": 3 of 5 spent
	clk.Add(30 * time.Second) // April: a new minute and a new month
	for i := range 3 {
		if _, err := a.Charge(t.Context(), c); err != nil {
			t.Fatalf("next minute, call %d: %v", i, err)
		}
	}
	st, err := budget.ListStatus(t.Context(), f.js, clk.Now())
	if err != nil || len(st) != 2 || st[0].Name != "m" || st[0].Spent != 3 || st[1].Spent != 3 || st[1].ResetIn != 30*24*time.Hour {
		t.Fatalf("ListStatus = %+v, %v", st, err)
	}
}

func TestRollingWindow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clk := newClock(t0)
	a, b := f.replica(t, clk.Now), f.replica(t, clk.Now)
	f.set(t, budget.Def{Name: "roll", Key: "ci-bot", Window: time.Minute, Limit: 5}, a, b)
	c := call("acme", "ci-bot", "echo", 1)
	charge := func(r *replica, n int) {
		t.Helper()
		for i := range n {
			if _, err := r.Charge(t.Context(), c); err != nil {
				t.Fatalf("%s: call %d: %v", clk.Now().Sub(t0), i, err)
			}
		}
	}
	charge(a, 3)
	clk.Add(20 * time.Second)
	charge(b, 2)
	clk.Add(10 * time.Second)
	_, err := a.Charge(t.Context(), c)
	var ex *policy.Exhausted
	if !errors.As(err, &ex) || ex.Budget.Spent != 5 || ex.Budget.ResetIn != 30*time.Second || ex.Budget.Period != "per rolling 1m" {
		t.Fatalf("at 30s: %v (%+v); want spent 5, room in 30s (when the first 3 leave)", err, ex)
	}
	clk.Add(31 * time.Second) // the first 3 left the window; the 2 of 20s are in it
	charge(b, 3)
	if _, err := a.Charge(t.Context(), c); err == nil {
		t.Fatal("a 6th call in the window was admitted")
	}
	st, err := budget.ListStatus(t.Context(), f.js, clk.Now())
	if err != nil || len(st) != 1 || st[0].Spent != 5 || st[0].ResetIn != 19*time.Second {
		t.Fatalf("ListStatus = %+v, %v; want 5 spent, the oldest leaving in 19s", st, err)
	}
	clk.Add(time.Hour) // all left: a cold window
	charge(a, 5)
}

func TestNoBudgetNoRoundTrip(t *testing.T) { // not parallel: AllocsPerRun
	f := setup(t)
	a := f.replica(t, nil)
	if a.Active("acme", "k") {
		t.Fatal("Active with no budget")
	}
	before := a.nc.Stats().OutMsgs
	for range 100 {
		sp, err := a.Charge(t.Context(), call("acme", "k", "echo", 3))
		if err != nil || len(sp.Nearly()) != 0 {
			t.Fatal(sp, err)
		}
		sp.Refund(t.Context())
	}
	if after := a.nc.Stats().OutMsgs; after != before {
		t.Fatalf("with no budget, charges sent %d messages", after-before)
	}
	f.set(t, budget.Def{Name: "only-search", Tenant: "acme", Tools: []string{"search"}, Period: budget.Day, Limit: 1}, a)
	if !a.Active("acme", "") || a.Active("other", "k") {
		t.Fatal("Active: want true for acme only")
	}
	before = a.nc.Stats().OutMsgs
	for range 100 {
		if _, err := a.Charge(t.Context(), call("acme", "", "echo", 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Charge(t.Context(), call("other", "", "search", 1)); err != nil {
			t.Fatal(err)
		}
	}
	if after := a.nc.Stats().OutMsgs; after != before {
		t.Fatalf("calls no budget applies to sent %d messages", after-before)
	}
	other := call("other", "", "search", 1)
	if allocs := testing.AllocsPerRun(100, func() {
		_, _ = a.Charge(context.Background(), other)
	}); allocs != 0 {
		t.Errorf("a charge no budget applies to allocates %v times", allocs)
	}
}

func TestRefundSoftAndSeveralBudgets(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.replica(t, nil)
	f.set(t, budget.Def{Name: "tenant", Tenant: "acme", Period: budget.Day, Limit: 10}, a)
	f.set(t, budget.Def{Name: "key", Key: "bot", Tools: []string{"search"}, Period: budget.Day, Limit: 4, Soft: 0.5}, a)
	c := call("acme", "bot", "search", 1)
	for i := range 4 {
		sp, err := a.Charge(t.Context(), c)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		nearly := sp.Nearly()
		if want := i >= 1; (len(nearly) == 1) != want {
			t.Fatalf("call %d: nearly = %+v; want the key's budget past its soft 50%% from the 2nd call", i, nearly)
		}
		if len(nearly) == 1 && (nearly[0].Name != "key" || nearly[0].Spent != int64(i+1) || nearly[0].Limit != 4) {
			t.Errorf("nearly = %+v", nearly[0])
		}
	}
	// the key's budget refuses: the tenant's is given back
	_, err := a.Charge(t.Context(), c)
	var ex *policy.Exhausted
	if !errors.As(err, &ex) || ex.Budget.Name != "key" {
		t.Fatalf("5th call: %v", err)
	}
	// another tool of the same key: only the tenant's budget applies
	sp, err := a.Charge(t.Context(), call("acme", "bot", "echo", 1))
	if err != nil {
		t.Fatal(err)
	}
	sp.Refund(t.Context())
	sp.Refund(t.Context()) // twice: once
	st, err := budget.ListStatus(t.Context(), f.js, time.Now())
	if err != nil || len(st) != 2 || st[0].Name != "key" || st[0].Spent != 4 || st[1].Spent != 4 {
		t.Fatalf("ListStatus = %+v, %v; want 4 and 4 spent", st, err)
	}
	if list, err := a.List(t.Context()); err != nil || len(list) != 2 || list[1].Left != 6 {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.replica(t, nil)
	f.set(t, budget.Def{Name: "x", Tenant: "acme", Period: budget.Day, Limit: 1}, a)
	if _, err := a.Charge(t.Context(), call("acme", "", "echo", 1)); err != nil {
		t.Fatal(err)
	}
	if err := budget.Remove(t.Context(), f.js, "x"); err != nil {
		t.Fatal(err)
	}
	if err := budget.Remove(t.Context(), f.js, "x"); !errors.Is(err, budget.ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}
	if err := budget.Reset(t.Context(), f.js, "nope", time.Now()); !errors.Is(err, budget.ErrNotFound) {
		t.Fatalf("reset of no budget: %v", err)
	}
	natstest.Eventually(t, 5*time.Second, "the replica forgets x", func() bool { return !a.Active("acme", "") })
	// defined again: its old spending is gone
	f.set(t, budget.Def{Name: "x", Tenant: "acme", Period: budget.Day, Limit: 1}, a)
	if _, err := a.Charge(t.Context(), call("acme", "", "echo", 1)); err != nil {
		t.Fatal(err)
	}
}

func TestListWithoutBucket(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, err := budget.ListStatus(t.Context(), f.js, time.Now())
	if err != nil || st != nil {
		t.Fatalf("ListStatus with no bucket = %v, %v", st, err)
	}
	if _, err := budget.Get(t.Context(), f.js, "a"); !errors.Is(err, budget.ErrNotFound) {
		t.Fatalf("Get with no bucket: %v", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := budget.Def{Name: "a", Tenant: "t", Period: budget.Day, Limit: 1}
	for _, tc := range []struct {
		change func(*budget.Def)
		field  string
	}{
		{func(d *budget.Def) { d.Name = "" }, "name:"},
		{func(d *budget.Def) { d.Name = "a b" }, "name:"},
		{func(d *budget.Def) { d.Name = strings.Repeat("a", 65) }, "name:"},
		{func(d *budget.Def) { d.Key = "k" }, "tenant: give a tenant or a key, not both"},
		{func(d *budget.Def) { d.Tenant = "" }, "tenant:"},
		{func(d *budget.Def) { d.Limit = -3 }, "limit: must be at least 1, got -3"},
		{func(d *budget.Def) { d.Limit = 0 }, "limit:"},
		{func(d *budget.Def) { d.Soft = 1.5 }, "soft:"},
		{func(d *budget.Def) { d.Soft = -0.1 }, "soft:"},
		{func(d *budget.Def) { d.Period = "week" }, `period: "week": want minute, hour, day or month`},
		{func(d *budget.Def) { d.Period = "" }, "period:"},
		{func(d *budget.Def) { d.Window = time.Hour }, "period: give a period or a rolling window, not both"},
		{func(d *budget.Def) { d.Period, d.Window = "", 30*time.Second }, "window:"},
		{func(d *budget.Def) { d.Period, d.Window = "", 32*24*time.Hour }, "window:"},
		{func(d *budget.Def) { d.Period, d.Window = "", 90*time.Second+time.Millisecond }, "window:"},
		{func(d *budget.Def) { d.Tools = []string{"ok", "bad tool"} }, `tools: "bad tool"`},
	} {
		d := ok
		tc.change(&d)
		err := d.Validate()
		if !errors.Is(err, budget.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate(%+v) = %v; want an error naming %q", d, err, tc.field)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	f := setup(t)
	bad := ok
	bad.Limit = -3
	if err := budget.Set(t.Context(), f.js, bad); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("Set of a negative limit: %v", err)
	}
}

func TestRefundAfterResetGivesNoExtraRoom(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.replica(t, nil)
	f.set(t, budget.Def{Name: "r", Tenant: "acme", Period: budget.Day, Limit: 2}, a)
	c := call("acme", "", "echo", 1)
	sp, err := a.Charge(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := budget.Reset(t.Context(), f.js, "r", time.Now()); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 5*time.Second, "the replica sees the reset", func() bool {
		d := a.Defs()
		return len(d) == 1 && !d[0].ResetAt.IsZero()
	})
	sp.Refund(t.Context()) // its turn failed after the reset: nothing to give back
	for i := range 2 {
		if _, err := a.Charge(t.Context(), c); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := a.Charge(t.Context(), c); err == nil {
		t.Fatal("a refund after the reset gave a third call room")
	}
}

func TestWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    budget.Def
		want string
	}{
		{budget.Def{Period: budget.Day}, "per day"},
		{budget.Def{Window: 90 * time.Minute}, "per rolling 90m"},
		{budget.Def{Window: 36 * time.Hour}, "per rolling 36h"},
		{budget.Def{Window: 7 * 24 * time.Hour}, "per rolling 7d"},
		{budget.Def{Window: 90 * time.Second}, "per rolling 1m30s"},
	} {
		if got := tc.d.PeriodWords(); got != tc.want {
			t.Errorf("PeriodWords(%v) = %q, want %q", tc.d.Window, got, tc.want)
		}
	}
	if w := (budget.Def{Key: "bot"}).Who(); w != "key bot" {
		t.Error(w)
	}
	if w := (budget.Def{Tenant: "acme", Cost: true}); w.Who() != "tenant acme" || w.Unit() != "cost units" {
		t.Error(w)
	}
}

func TestDefJSON(t *testing.T) {
	t.Parallel()
	d := budget.Def{Name: "a", Key: "k", Tools: []string{"x"}, Window: 90 * time.Minute, Limit: 5, Cost: true, Soft: 0.5,
		ResetAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b, err := json.Marshal(d)
	if err != nil || !strings.Contains(string(b), `"window":"1h30m0s"`) {
		t.Fatalf("%s, %v", b, err)
	}
	var back budget.Def
	if err := json.Unmarshal(b, &back); err != nil || back.Window != d.Window || back.Limit != 5 || !back.ResetAt.Equal(d.ResetAt) || back.Tools[0] != "x" {
		t.Fatalf("%+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"name":"a","window":"soon"}`), &back); err == nil || !strings.Contains(err.Error(), "window") {
		t.Fatalf("a bad window: %v", err)
	}
}
