package budget

import (
	"context"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
)

var _ policy.Budgets = (*Store)(nil)

// refundTimeout bounds the subtraction of a charge given back.
const refundTimeout = 5 * time.Second

// Charge spends c's cost (Info.Cost, 0 meaning 1; a budget of calls counts
// 1) from every budget that applies to c: the budgets of its tenant and of
// its key that cover its tool. When one of them has no room, what was
// spent is given back and the error is a *policy.Exhausted naming that
// budget. A call no budget applies to costs no round trip.
func (s *Store) Charge(ctx context.Context, c *policy.Call) (policy.Spend, error) {
	ix := s.index.Load()
	if ix == nil {
		return noSpend, nil
	}
	cost := int64(max(c.Info.Cost, 1))
	var sp *spend
	lists := [2][]*entry{ix.byTenant[c.Tenant], nil}
	if c.Key != "" {
		lists[1] = ix.byKey[c.Key]
	}
	for _, list := range lists {
		for _, e := range list {
			if !e.def.covers(c.Tool) {
				continue
			}
			units := int64(1)
			if e.def.Cost {
				units = cost
			}
			if sp == nil {
				sp = &spend{s: s}
			}
			if err := s.chargeOne(ctx, e, c.Tool, units, sp); err != nil {
				sp.Refund(ctx)
				return nil, err
			}
		}
	}
	if sp == nil {
		return noSpend, nil
	}
	return sp, nil
}

// chargeOne spends units from e's budget for a call of tool, recording
// the charge in sp; a *policy.Exhausted when it has no room.
func (s *Store) chargeOne(ctx context.Context, e *entry, tool string, units int64, sp *spend) error {
	now := s.cfg.Now()
	d := e.def
	var (
		subj    string
		total   int64
		resetIn time.Duration
		w       slots
	)
	if d.Window == 0 {
		id, end := periodID(d.Period, now)
		subj, resetIn = SubjectPrefix+e.tok+"."+id, end.Sub(now)
	} else {
		var err error
		if w, err = e.window(ctx, s.st, now); err != nil {
			return err
		}
		subj = slotSubject(d, w.g, w.cur)
	}
	n, err := s.st.incr(ctx, subj, units)
	if err != nil {
		return err
	}
	sp.charges = append(sp.charges, spent{subj: subj, units: units, e: e})
	total = n
	if d.Window != 0 {
		w.vals[w.cur] = n
		total = w.sum()
		if total > d.Limit {
			resetIn = w.roomIn(now, d.Limit, total-units, units)
		} else {
			resetIn = w.oldestLeaves(now)
		}
	}
	b := classify.Budget{Name: d.Name, Tool: tool, Limit: d.Limit, Cost: d.Cost, Period: d.PeriodWords(), ResetIn: resetIn}
	if total > d.Limit {
		b.Spent = min(total-units, d.Limit)
		s.cfg.Metrics.Refused(d.Name)
		s.cfg.Metrics.Spent(d.Name, b.Spent, d.Limit)
		return &policy.Exhausted{Budget: b}
	}
	b.Spent = total
	s.cfg.Metrics.Spent(d.Name, total, d.Limit)
	if soft := d.soft(); soft < 1 && float64(total) >= soft*float64(d.Limit) {
		sp.nearly = append(sp.nearly, b)
	}
	return nil
}

// window returns e's rolling window at now with the spending of its closed
// sub-periods: from the cache, reading only those that closed lately (a
// charge of another replica may still land in them) and, when the cache
// is cold or far behind, every counter of the window.
func (e *entry) window(ctx context.Context, st *store, now time.Time) (slots, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := newSlots(e.def, now)
	final := slotIndex(w.g, now.Add(-settle)) - 1
	from := max(e.final+1, w.lo())
	if !e.loaded || w.cur-1-from > 2 {
		cold, err := st.window(ctx, e.def, now)
		if err != nil {
			return w, err
		}
		e.closed = cold.vals
		delete(e.closed, w.cur)
	} else {
		for idx := from; idx < w.cur; idx++ {
			v, err := st.value(ctx, slotSubject(e.def, w.g, idx))
			if err != nil {
				return w, err
			}
			e.closed[idx] = v
		}
	}
	e.loaded, e.final = true, final
	for idx, v := range e.closed {
		if idx < w.lo() {
			delete(e.closed, idx)
			continue
		}
		w.vals[idx] = v
	}
	return w, nil
}

// spend is what a Charge spent: the counters and the units added to each.
type spend struct {
	s       *Store
	charges []spent
	nearly  []classify.Budget
}

// spent is one counter a charge added to.
type spent struct {
	subj  string
	units int64
	e     *entry // the budget as it was defined when charged
}

// noSpend is the Spend of a call no budget applies to.
var noSpend policy.Spend = (*spend)(nil)

// Refund subtracts what was spent, from the same counters (a period that
// ended meanwhile keeps its own count). A failure is logged: the units
// stay spent (the budget under-admits, never over-admits).
func (sp *spend) Refund(ctx context.Context) {
	if sp == nil || len(sp.charges) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refundTimeout)
	defer cancel()
	for _, c := range sp.charges {
		if sp.s.resetSince(c.e) {
			continue // the counter was purged: a subtraction would give room twice
		}
		if _, err := sp.s.st.incr(ctx, c.subj, -c.units); err != nil {
			sp.s.log.Warn("budget: a refund failed: the units stay spent", "subject", c.subj, "units", c.units, "error", err)
		}
	}
	sp.charges = nil
}

// Nearly lists the budgets past their soft threshold after this spending.
func (sp *spend) Nearly() []classify.Budget {
	if sp == nil {
		return nil
	}
	return sp.nearly
}

// resetSince reports whether the budget of e was reset (or removed) since
// e was its definition.
func (s *Store) resetSince(e *entry) bool {
	ix := s.index.Load()
	for _, cur := range ix.all {
		if cur.tok == e.tok {
			return !cur.def.ResetAt.Equal(e.def.ResetAt)
		}
	}
	return true
}
