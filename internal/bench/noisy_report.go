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

// NoisyReport is what RunNoisyNeighbour measured.
type NoisyReport struct {
	Machine  Machine       `json:"machine"`
	Settings NoisySettings `json:"settings"`
	// AAlone is tenant A's backlog with nobody else; WithB the same
	// backlog with tenant B's trickle; B is B's calls in that phase.
	AAlone BacklogPhase `json:"a_alone"`
	WithB  BacklogPhase `json:"a_with_b"`
	B      TricklePhase `json:"b"`
	// Cap is the per-key concurrency cap phase, Rate the per-key rate
	// limit phase.
	Cap  CapPhase  `json:"cap"`
	Rate RatePhase `json:"rate"`
	// FairnessOff and FairnessOn are one tenant's closed-loop load with
	// the scheduler off and on.
	FairnessOff Phase `json:"fairness_off"`
	FairnessOn  Phase `json:"fairness_on"`
	// FairnessRatio is the median of FairnessPairRatios: on's throughput
	// over off's in each pair of parts run one after the other.
	FairnessRatio      float64   `json:"fairness_ratio"`
	FairnessPairRatios []float64 `json:"fairness_pair_ratios"`
	// Targets are the targets and whether this run met them.
	Targets []Target `json:"targets"`
	// PeakRSSBytes is the peak resident set size of the whole run.
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
}

// NoisySettings echo the scenario's configuration in the report.
type NoisySettings struct {
	Scenario          string  `json:"scenario"`
	Storage           string  `json:"storage"`
	Workers           int     `json:"workers"`
	WorkerConcurrency int     `json:"worker_concurrency"`
	Slots             int     `json:"slots"`
	SleepMillis       float64 `json:"sleep_ms"`
	Backlog           int     `json:"backlog"`
	BacklogTurn       int     `json:"backlog_turn"`
	IntervalMillis    float64 `json:"b_interval_ms"`
	Calls             int     `json:"calls"`
	Concurrency       int     `json:"concurrency"`
	Cap               int     `json:"cap"`
	CapCalls          int     `json:"cap_calls_per_key"`
	Rate              int     `json:"rate_per_s"`
	Offered           float64 `json:"offered_per_s"`
	RateForSeconds    float64 `json:"rate_for_s"`
	// Admission says how the dispatcher's admission bounds were set so
	// that the backlog is admitted whole.
	Admission string `json:"admission"`
}

// BacklogPhase is tenant A's backlog: Calls dispatched at once, answered
// over Seconds.
type BacklogPhase struct {
	Calls       int     `json:"calls"`
	Errors      int     `json:"errors"`
	Seconds     float64 `json:"seconds"`
	CallsPerSec float64 `json:"calls_per_s"`
}

// TricklePhase is tenant B's calls, one per interval, request to result.
type TricklePhase struct {
	Calls   int     `json:"calls"`
	Errors  int     `json:"errors"`
	Latency Latency `json:"latency_ms"`
	// Slowest are the slowest calls (at most slowestShown), slowest
	// first: when in the phase each was sent, and its latency.
	Slowest []TrickleCall `json:"slowest"`
	// Intakes are, for each phase with B, when the dispatcher had taken
	// in all of A's backlog (from its start; 0: not seen, e.g. without a
	// scheduler); AfterIntake is the latency of the AfterIntakeCalls calls
	// of B sent from then on.
	Intakes          []float64 `json:"intake_ms"`
	AfterIntake      Latency   `json:"after_intake_latency_ms"`
	AfterIntakeCalls int       `json:"after_intake_calls"`

	// Of one phase (backlog): its intake, and every call.
	IntakeMillis float64       `json:"-"`
	all          []TrickleCall // slowest first once merged
}

// TrickleCall is one of B's calls: when it was sent, from the start of
// A's backlog, and how long it took, in milliseconds.
type TrickleCall struct {
	SentMillis    float64 `json:"sent_ms"`
	LatencyMillis float64 `json:"latency_ms"`
}

// slowestShown is how many of B's slowest calls a report lists.
const slowestShown = 5

// CapPhase is the per-key concurrency cap: the most calls of each key the
// tool's handler saw running at once, fleet-wide.
type CapPhase struct {
	Cap        int            `json:"cap"`
	Calls      int            `json:"calls"`
	Errors     int            `json:"errors"`
	Seconds    float64        `json:"seconds"`
	MaxRunning map[string]int `json:"max_running"`
}

// RatePhase is the per-key rate limit: a key offering more than its limit.
type RatePhase struct {
	Limit   int     `json:"limit_per_s"`
	Offered float64 `json:"offered_per_s"`
	Calls   int     `json:"calls"`
	// Served is the calls that ran; ServedPerSec their rate from 1 s
	// after the offer began (after the first burst) to its end.
	Served       int     `json:"served"`
	ServedPerSec float64 `json:"served_per_s"`
	// Cancelled is the calls not answered when the offer ended (nearly
	// all still held by their key's limit), then cancelled; Errors the
	// calls answered with an is_error before.
	Cancelled int `json:"cancelled"`
	Errors    int `json:"errors"`
}

// Target is one of the targets.
type Target struct {
	Name     string  `json:"name"`
	Measured float64 `json:"measured"`
	Unit     string  `json:"unit,omitempty"`
	Goal     string  `json:"goal"`
	Met      bool    `json:"met"`
}

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
