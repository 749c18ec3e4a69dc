package opscmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolpool/toolpool/internal/cli"
	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/classify"
)

// statusByKey is "orchestrator status --by-key": every orchestrator's
// scheduler snapshot, summed per tool and key, as a table or JSON
// (ops.SchedStatus). No orchestrator answering is exit 1, with a message
// that says what that means.
func statusByKey(ctx context.Context, env *cli.Env, lf *liveFlags, asJSON bool) error {
	if lf.timeout <= 0 {
		return cli.Usagef("--timeout must be positive")
	}
	nc, err := lf.nats.Connect("", "toolpool-status", cli.WarnLogger(env.Stderr))
	if err != nil {
		return cli.Unavailable(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, lf.timeout)
	defer cancel()
	snaps, err := ops.SchedStats(ctx, nc, ops.SchedStatsOptions{})
	if errors.Is(err, ops.ErrNoOrchestrator) {
		return fmt.Errorf("no orchestrator answered within %s: none is running on this NATS server, "+
			"or they run a version without fair shares", classify.FormatDuration(ops.SchedStatsWindowDefault))
	}
	if err != nil {
		return err
	}
	st := ops.SumSchedStats(snaps)
	if asJSON {
		return cli.WriteJSON(env.Stdout, st)
	}
	writeStatusByKey(env, st)
	return nil
}

// writeStatusByKey prints the table of statusByKey: a row per tool (key
// "*": its totals, slots and window) and one per key.
func writeStatusByKey(env *cli.Env, st ops.SchedStatus) {
	fmt.Fprintf(env.Stdout, "%d orchestrator(s): %s\n", len(st.Orchestrators), strings.Join(st.Orchestrators, ", "))
	if len(st.Tools) == 0 {
		fmt.Fprintln(env.Stdout, "no calls waiting, in flight or served recently")
		return
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tKEY\tTENANT\tWEIGHT\tWAITING\tLIMITED\tIN FLIGHT\tSERVED/S\tLIMITS")
	for _, t := range st.Tools {
		var perSecond float64
		for _, k := range t.Keys {
			perSecond += k.PerSecond
		}
		fmt.Fprintf(tw, "%s\t*\t-\t-\t%d\t%d\t%d\t%s\t%s\n", t.Tool, t.Waiting, t.Limited, t.InFlight,
			formatRate(perSecond), windowText(t))
		for _, k := range t.Keys {
			tenant, weight := orDash(k.Tenant), "-"
			if k.Weight > 0 {
				weight = strconv.Itoa(k.Weight)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", t.Tool, k.Key, tenant, weight,
				waitingText(k), k.Limited, k.InFlight, formatRate(k.PerSecond), limitsText(t.Limits))
		}
	}
	_ = tw.Flush()
}

// windowText is a tool row's LIMITS: its slots and window.
func windowText(t pooltype.ToolStats) string {
	if t.Slots == 0 {
		return "slots unknown, no window"
	}
	return fmt.Sprintf("slots %d, window %d", t.Slots, t.Window)
}

// waitingText is a key's waiting calls, with those of a priority other
// than normal named: "12 (3 high)".
func waitingText(k pooltype.KeyStats) string {
	s := strconv.Itoa(k.Waiting)
	var parts []string
	for _, p := range []string{"high", "low"} {
		if n := k.ByPriority[p]; n > 0 {
			parts = append(parts, strconv.Itoa(n)+" "+p)
		}
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// limitsText is a key row's LIMITS: the per-key cap and rate the fleet
// applies, "-" for none.
func limitsText(l pooltype.Limits) string {
	var parts []string
	if l.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("cap %d", l.Concurrency))
	}
	if l.Rate > 0 && l.Per > 0 {
		per := classify.FormatDuration(l.Per)
		if l.Per == time.Second {
			per = "s"
		}
		parts = append(parts, fmt.Sprintf("%s/%s burst %d", formatRate(l.Rate), per, l.Burst))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// formatRate prints a rate with at most one decimal.
func formatRate(r float64) string {
	return strconv.FormatFloat(math.Round(r*10)/10, 'f', -1, 64)
}
