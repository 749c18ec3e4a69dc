package opscmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
)

// budgetJSON is a budget as "budgets ls --json" prints it.
type budgetJSON struct {
	Name     string    `json:"name"`
	Tenant   string    `json:"tenant,omitempty"`
	Key      string    `json:"key,omitempty"`
	Tools    []string  `json:"tools,omitempty"`
	Period   string    `json:"period,omitempty"`
	Window   string    `json:"window,omitempty"`
	Limit    int64     `json:"limit"`
	Unit     string    `json:"unit"`
	Soft     float64   `json:"soft"`
	Spent    int64     `json:"spent"`
	Left     int64     `json:"left"`
	ResetsIn float64   `json:"resets_in_seconds"`
	ResetAt  time.Time `json:"reset_at,omitzero"`
}

// toBudgetJSON is st as "budgets ls --json" prints it.
func toBudgetJSON(st budget.Status) budgetJSON {
	out := budgetJSON{Name: st.Name, Tenant: st.Tenant, Key: st.Key, Tools: st.Tools, Period: string(st.Period),
		Limit: st.Limit, Unit: st.Unit(), Soft: st.Soft, Spent: st.Spent, Left: st.Left,
		ResetsIn: st.ResetIn.Seconds(), ResetAt: st.ResetAt}
	if out.Soft == 0 {
		out.Soft = budget.SoftDefault
	}
	if st.Window != 0 {
		out.Window = strings.TrimPrefix(st.PeriodWords(), "per rolling ")
	}
	return out
}

// budgetsLs is "budgets ls": the budgets with their spending.
func budgetsLs() *cli.Command {
	var (
		nf     cli.NATSFlags
		asJSON bool
	)
	return &cli.Command{
		Name:         "ls",
		Aliases:      []string{"list"},
		Args:         "[--json]",
		Summary:      "list them: name, whose calls, tools, period, limit, spent, left, resets in",
		Interspersed: true,
		Flags: func(fs *flag.FlagSet) {
			nf.Register(fs)
			fs.BoolVar(&asJSON, "json", false, "print a JSON array")
		},
		Run: func(ctx context.Context, env *cli.Env, _ []string) error {
			nc, j, err := connectBudgets(env, &nf)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := budgetCtx(ctx)
			defer cancel()
			list, err := budget.ListStatus(ctx, j, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]budgetJSON, 0, len(list))
				for _, st := range list {
					out = append(out, toBudgetJSON(st))
				}
				return cli.WriteJSON(env.Stdout, out)
			}
			if len(list) == 0 {
				fmt.Fprintln(env.Stderr, "no budgets (orchestrator budgets set defines one)")
				return nil
			}
			writeBudgets(env.Stdout, list)
			return nil
		},
	}
}

// writeBudgets prints the ls table.
func writeBudgets(w io.Writer, list []budget.Status) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BUDGET\tWHO\tTOOLS\tPERIOD\tLIMIT\tSPENT\tLEFT\tRESETS IN")
	for _, st := range list {
		tools := "*"
		if len(st.Tools) > 0 {
			tools = strings.Join(st.Tools, ",")
		}
		limit := strconv.FormatInt(st.Limit, 10)
		if st.Cost {
			limit += " units"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", st.Name, st.Who(), ops.OneLine(tools, 40), periodFlag(st.Def),
			limit, st.Spent, st.Left, resetsIn(st))
	}
	_ = tw.Flush()
}

// resetsIn is when st has room again, as ls prints it.
func resetsIn(st budget.Status) string {
	if st.Window != 0 && st.Spent == 0 {
		return "-"
	}
	return ops.Age(st.ResetIn)
}

// statusBudgets prints the budgets' spending under "orchestrator status":
// one line per budget. A deployment without budgets prints nothing; one
// whose budgets cannot be read says so on stderr (the tools' status stands).
func statusBudgets(ctx context.Context, env *cli.Env, j budgetJS) {
	list, err := budget.ListStatus(ctx, j, time.Now())
	if err != nil {
		fmt.Fprintf(env.Stderr, "budgets: %v\n", err)
		return
	}
	if len(list) == 0 {
		return
	}
	fmt.Fprintln(env.Stdout)
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BUDGET\tWHO\tSPENT/LIMIT\tPERIOD\tRESETS IN")
	for _, st := range list {
		unit := ""
		if st.Cost {
			unit = " units"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d%s\t%s\t%s\n", st.Name, st.Who(), st.Spent, st.Limit, unit, periodFlag(st.Def), resetsIn(st))
	}
	_ = tw.Flush()
}
