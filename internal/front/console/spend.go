package console

import (
	"context"
	"strings"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/budget"
	"github.com/toolpool/toolpool/pkg/classify"
)

// budgetRow is one budget on the overview.
type budgetRow struct {
	Name, Who, Tools, Period string
	Spent, Limit, Left       int64
	Unit                     string // "calls" or "cost units"
	ResetIn                  string
	// Level is "exhausted" (no room left: red), "nearly" (past the soft
	// threshold: amber) or "".
	Level string
}

func budgetRowOf(s *budget.Status) budgetRow {
	r := budgetRow{Name: s.Name, Who: s.Who(), Tools: "every tool", Period: s.PeriodWords(),
		Spent: s.Spent, Limit: s.Limit, Left: s.Left, Unit: s.Unit(), ResetIn: classify.FormatDuration(s.ResetIn)}
	if len(s.Tools) > 0 {
		r.Tools = strings.Join(s.Tools, ", ")
	}
	soft := s.Soft
	if soft <= 0 {
		soft = budget.SoftDefault
	}
	switch {
	case s.Limit > 0 && s.Left <= 0:
		r.Level = "exhausted"
	case soft < 1 && float64(s.Spent) >= soft*float64(s.Limit):
		r.Level = "nearly"
	}
	return r
}

// budgetsReadTimeout bounds one read of the budgets' spending.
const budgetsReadTimeout = 2 * time.Second

// readBudgets returns the budgets' rows, or what went wrong reading them.
func (c *Console) readBudgets(ctx context.Context) ([]budgetRow, string) {
	if c.cfg.Budgets == nil {
		return nil, ""
	}
	ctx, cancel := context.WithTimeout(ctx, budgetsReadTimeout)
	defer cancel()
	list, err := c.cfg.Budgets.List(ctx)
	if err != nil {
		return nil, "The budgets cannot be read: " + err.Error()
	}
	rows := make([]budgetRow, 0, len(list))
	for i := range list {
		rows = append(rows, budgetRowOf(&list[i]))
	}
	return rows, ""
}

// addCacheCounts puts the cache's counts on the tools' rows (a tool with
// counts only gets a row of its own), and reports whether any tool has
// some: the column shows only then.
func (c *Console) addCacheCounts(byTool map[string]*toolRow) bool {
	if c.cfg.CacheCounts == nil {
		return false
	}
	some := false
	for _, cc := range c.cfg.CacheCounts() {
		if cc.Hit+cc.Miss+cc.Coalesced+cc.Bypass == 0 {
			continue
		}
		r := byTool[cc.Tool]
		if r == nil {
			r = &toolRow{Tool: cc.Tool}
			byTool[cc.Tool] = r
		}
		r.Cache, some = &cc, true
	}
	return some
}
