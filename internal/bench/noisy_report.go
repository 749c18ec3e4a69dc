package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes r as indented JSON.
func (r *NoisyReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes r as tables for people: the phases, then the targets.
func (r *NoisyReport) WriteText(w io.Writer) error {
	s := r.Settings
	var b strings.Builder
	fmt.Fprintf(&b, "toolpool bench --scenario %s: tool sleep %gms, %d slots fleet-wide (%d in-process workers × %d; the tool's concurrency and the dispatcher's Slots)\n",
		s.Scenario, s.SleepMillis, s.Slots, s.Workers, s.WorkerConcurrency)
	fmt.Fprintf(&b, "server: embedded, %s storage; admission: %s\n", s.Storage, s.Admission)
	fmt.Fprintf(&b, "machine: %d CPU(s), %s, %s\n\n", r.Machine.CPUs, cmp.Or(r.Machine.CPUModel, "unknown CPU"), r.Machine.GoVersion)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tcalls\terrors\tseconds\tcalls/s\tp50 ms\tp99 ms\tmax ms\t")
	backlog := func(name string, p BacklogPhase) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%s\t\t\t\t\n", name, p.Calls, p.Errors, p.Seconds, thousands(p.CallsPerSec))
	}
	at := fmt.Sprintf("%d at once", s.Backlog)
	if s.BacklogTurn > 1 {
		at = fmt.Sprintf("%d at once in turns of %d", s.Backlog, s.BacklogTurn)
	}
	backlog("A alone: "+at+", twice", r.AAlone)
	backlog("A with B, twice", r.WithB)
	fmt.Fprintf(tw, "B: 1 per %gms, with A\t%d\t%d\t\t\t%.1f\t%.1f\t%.1f\t\n", s.IntervalMillis, r.B.Calls, r.B.Errors,
		r.B.Latency.P50, r.B.Latency.P99, r.B.Latency.Max)
	fmt.Fprintf(tw, "cap %d per key: A and C\t%d\t%d\t%.2f\t\t\t\t\t\n", r.Cap.Cap, r.Cap.Calls, r.Cap.Errors, r.Cap.Seconds)
	fmt.Fprintf(tw, "rate %d/s per key: A offers %g/s\t%d\t%d\t%.2f\t%.1f served\t\t\t\t\n", r.Rate.Limit, r.Rate.Offered,
		r.Rate.Calls, r.Rate.Errors, s.RateForSeconds, r.Rate.ServedPerSec)
	for _, p := range []*Phase{&r.FairnessOff, &r.FairnessOn} {
		fmt.Fprintf(tw, "%s: 1 tenant, %d agents\t%d\t%d\t%.2f\t%s\t%.1f\t%.1f\t%.1f\t\n", strings.ReplaceAll(p.Name, "_", " "), s.Concurrency,
			p.Calls, p.ErrorCalls, p.Seconds, thousands(p.CallsPerSec), p.Latency.P50, p.Latency.P99, p.Latency.Max)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\ncap phase, most calls running at once by key (sampled in the tool's handler, fleet-wide):")
	for _, k := range slices.Sorted(maps.Keys(r.Cap.MaxRunning)) {
		fmt.Fprintf(&b, " %s=%d", cmp.Or(k, `""`), r.Cap.MaxRunning[k])
	}
	if len(r.B.Slowest) > 0 {
		fmt.Fprintf(&b, "\nB's slowest calls (sent at, from the backlog's start → latency):")
		for _, c := range r.B.Slowest {
			fmt.Fprintf(&b, " %.0fms→%.0fms", c.SentMillis, c.LatencyMillis)
		}
	}
	if len(r.B.Intakes) > 0 && !slices.Contains(r.B.Intakes, 0) {
		fmt.Fprintf(&b, "\nthe dispatcher had taken in all of A's calls %s ms after they were sent; B's %d calls sent from then on: p50 %.1f ms, p99 %.1f ms, max %.1f ms",
			joinFloats(r.B.Intakes, "%.0f", " and "), r.B.AfterIntakeCalls, r.B.AfterIntake.P50, r.B.AfterIntake.P99, r.B.AfterIntake.Max)
	}
	fmt.Fprintf(&b, "\nA's backlog ran with B, alone, alone, with B, each on a fresh pool")
	fmt.Fprintf(&b, "\nfairness off and on: %d calls each, in %d parts each, run in pairs (off, on), (on, off), ..., each part on a fresh pool; on/off by pair: %s; CPU per call off %.0f µs, on %.0f µs; allocations per call off %.0f, on %.0f\nrate phase: %d of %d calls ran by the offer's end, served/s counted from 1 s after it began (past the first burst) to its end; the %d unanswered then were cancelled\n\n",
		s.Calls, singleSlices/2, joinFloats(r.FairnessPairRatios, "%.2f", " "), r.FairnessOff.CPUPerCallMicros, r.FairnessOn.CPUPerCallMicros,
		r.FairnessOff.AllocsPerCall, r.FairnessOn.AllocsPerCall, r.Rate.Served, r.Rate.Calls, r.Rate.Cancelled)

	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tmeasured\tgoal\tmet")
	for _, t := range r.Targets {
		met := "no"
		if t.Met {
			met = "yes"
		}
		fmt.Fprintf(tw, "%s\t%.4g%s\t%s\t%s\n", t.Name, t.Measured, unitSuffix(t.Unit), t.Goal, met)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\npeak RSS of the bench process: %s (the embedded server included)\n", mib(r.PeakRSSBytes))
	_, err := io.WriteString(w, b.String())
	return err
}

// joinFloats formats each of xs with format and joins them with sep.
func joinFloats(xs []float64, format, sep string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, sep)
}

func unitSuffix(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}
