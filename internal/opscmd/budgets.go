package opscmd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/orchestrator/budget"
)

// Budgets is "orchestrator budgets": a group, one file per subcommand
// (budgets_ls.go, budgets_set.go, budgets_reset.go). Exit 0 on success, 1
// when a command failed (no such budget), 2 on usage or connection errors.
func Budgets() *cli.Command {
	return &cli.Command{
		Name:    "budgets",
		Summary: "spend caps per tenant or API key: budgets ls|set|reset|rm (orchestrator budgets -h)",
		Help: `Operates the budgets: caps on the calls (or the tools' cost units) a tenant
or one API key may spend per calendar period (minute, hour, day, month, in
UTC) or per rolling window. Every orchestrator enforces them before a call
is published, fleet-wide: a call over budget is answered with an is_error
(code budget_exhausted) that tells the model when the budget has room again.

Every command takes --nats-url (env NATS_URL) and the credential flags.`,
		Commands: []*cli.Command{budgetsLs(), budgetsSet(), budgetsReset(), budgetsRm()},
	}
}

// connectBudgets connects for the budgets commands; its error exits 2.
func connectBudgets(env *cli.Env, f *cli.NATSFlags) (*nats.Conn, js.JetStream, error) {
	nc, j, err := f.ConnectJetStream("toolpool-budgets", cli.WarnLogger(env.Stderr))
	if err != nil {
		return nil, nil, cli.Unavailable(err)
	}
	return nc, j, nil
}

// budgetCtx bounds one budgets command's requests.
func budgetCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 30*time.Second)
}

// noBudget is the error of a budget that is not defined: exit 1.
func noBudget(name string, err error) error {
	if errors.Is(err, budget.ErrNotFound) {
		return fmt.Errorf("no budget named %q (orchestrator budgets ls lists them)", name)
	}
	return err
}

// budgetName checks the NAME argument.
func budgetName(name string) error {
	if !budget.ValidName(name) {
		return cli.Usagef("NAME %q: a budget's name is 1 to %d letters, digits, '_', '.' or '-'", name, budget.MaxNameLen)
	}
	return nil
}

// parseWindow reads --window: a Go duration ("90m", "36h") or whole days
// ("7d").
func parseWindow(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 {
			return 0, cli.Usagef("--window %q: want a duration such as 90m, 36h or 7d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, cli.Usagef("--window %q: want a duration such as 90m, 36h or 7d", s)
	}
	return d, nil
}

// periodFlag is a budget's period as the commands print it: "day",
// "rolling 90m".
func periodFlag(d budget.Def) string {
	return strings.TrimPrefix(d.PeriodWords(), "per ")
}

// budgetJS is the JetStream context the admin functions take.
type budgetJS = js.JetStream

// budgetAdmin runs do on the budget name and says done; a budget that does
// not exist exits 1.
func budgetAdmin(ctx context.Context, env *cli.Env, nf *cli.NATSFlags, name, done string, do func(context.Context, string, budgetJS) error) error {
	if err := budgetName(name); err != nil {
		return err
	}
	nc, j, err := connectBudgets(env, nf)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := budgetCtx(ctx)
	defer cancel()
	if err := do(ctx, name, j); err != nil {
		return noBudget(name, err)
	}
	fmt.Fprintf(env.Stdout, "budget %s %s\n", name, done)
	return nil
}
