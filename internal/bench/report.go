package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Phase names.
const (
	PhaseBaseline       = "baseline"
	PhasePool           = "pool"
	PhasePoolNoFailures = "pool_no_failures"
)

// Latency is a latency distribution in milliseconds. In a closed-loop run
// it is the time an agent waited for its turn's results; in an open-loop
// run, from when the turn was due.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// Phase is what one phase measured: the baseline, the pool, or the pool
// without failures (the reference of a run with failures).
type Phase struct {
	Name  string `json:"name"`
	Round int    `json:"round,omitempty"` // 1-based; 0 in medians
	// Calls answered, errors included, and turns run.
	Calls uint64 `json:"calls"`
	Turns uint64 `json:"turns"`
	// Seconds from the first turn to the last result.
	Seconds     float64 `json:"seconds"`
	CallsPerSec float64 `json:"calls_per_s"`
	Latency     Latency `json:"latency_ms"`
	// AttemptsPerCall is the executions per call the results report (1
	// without failures).
	AttemptsPerCall float64 `json:"attempts_per_call"`
	// ErrorCalls is the number of calls that ended in is_error (or could
	// not be dispatched), Errors the same by class.
	ErrorCalls uint64            `json:"error_calls"`
	Errors     map[string]uint64 `json:"errors"`
	// CPUPerCallMicros is the process's CPU time (user + system) per call,
	// embedded server included.
	CPUPerCallMicros float64 `json:"cpu_us_per_call"`
	// AllocsPerCall and AllocBytesPerCall are the process's heap
	// allocations per call, embedded server included: steadier than
	// timings on a shared machine.
	AllocsPerCall     float64 `json:"allocs_per_call"`
	AllocBytesPerCall float64 `json:"alloc_bytes_per_call"`
	// PeakRSSBytes is the process's peak resident set size during the
	// phase (VmHWM, reset when the phase starts where the system allows);
	// the embedded server is part of the process.
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
}

// Ratios are the pool's figures divided by the baseline's, measured in the
// same run (medians of the rounds' ratios). Throughput above 1 or
// latencies below 1 favour the pool. With failures injected the pool's
// run without failures is the one compared, as the baseline has none.
type Ratios struct {
	Throughput float64 `json:"throughput"`
	P50        float64 `json:"p50"`
	P90        float64 `json:"p90"`
	P99        float64 `json:"p99"`
	P999       float64 `json:"p99_9"`
	CPUPerCall float64 `json:"cpu_per_call"`
}

// Settings echo the run's configuration in the report.
type Settings struct {
	Server            string  `json:"server"` // "embedded" or "external"
	Storage           string  `json:"storage"`
	Workers           int     `json:"workers"` // in-process; 0 when external
	WorkerConcurrency int     `json:"worker_concurrency"`
	Calls             int     `json:"calls,omitempty"`
	DurationSeconds   float64 `json:"duration_s,omitempty"`
	Warmup            int     `json:"warmup_calls"`
	Concurrency       int     `json:"concurrency"`
	Rate              float64 `json:"rate,omitempty"`
	Batch             int     `json:"batch"`
	Tool              string  `json:"tool"`
	SleepMillis       float64 `json:"sleep_ms,omitempty"`
	Payload           int     `json:"payload_bytes"`
	CallBytes         int     `json:"call_message_bytes"`
	ResultBytes       int     `json:"result_message_bytes"`
	Fail              string  `json:"fail,omitempty"`
	Rounds            int     `json:"rounds"`
	// Fronts are the front doors measured besides direct dispatch.
	Fronts []string `json:"fronts,omitempty"`
}

// Report is the outcome of a bench run.
type Report struct {
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`
	// Baseline, Pool and PoolNoFailures are medians over the rounds
	// (counts are totals).
	Baseline       *Phase `json:"baseline,omitempty"`
	Pool           Phase  `json:"pool"`
	PoolNoFailures *Phase `json:"pool_no_failures,omitempty"`
	// Fronts are the pool reached through its front doors (pool_http,
	// pool_mcp, pool_mcp_sdk), medians over the rounds, in Settings.Fronts' order.
	Fronts []Phase `json:"fronts,omitempty"`
	// Ratios is the pool over the baseline; nil without a baseline.
	Ratios *Ratios `json:"ratios,omitempty"`
	// FailureThroughputRatio is the pool's throughput with failures over
	// its throughput without, when failures were injected.
	FailureThroughputRatio *float64 `json:"failure_throughput_ratio,omitempty"`
	// PeakRSSBytes is the peak resident set size of the whole run.
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
	// Runs holds every phase of every round.
	Runs []Phase `json:"runs"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Median is the median of xs (0 for none), xs left as it is.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// medianPhase summarises the rounds of one phase: medians of the rates,
// latencies and per-call figures, totals of the counts.
func medianPhase(ps []Phase) Phase {
	out := Phase{Name: ps[0].Name, Errors: map[string]uint64{}}
	pick := func(f func(Phase) float64) float64 {
		xs := make([]float64, len(ps))
		for i, p := range ps {
			xs[i] = f(p)
		}
		return Median(xs)
	}
	for _, p := range ps {
		out.Calls += p.Calls
		out.Turns += p.Turns
		out.ErrorCalls += p.ErrorCalls
		for c, n := range p.Errors {
			out.Errors[c] += n
		}
		out.PeakRSSBytes = max(out.PeakRSSBytes, p.PeakRSSBytes)
	}
	out.Seconds = pick(func(p Phase) float64 { return p.Seconds })
	out.CallsPerSec = pick(func(p Phase) float64 { return p.CallsPerSec })
	out.Latency = Latency{
		P50:  pick(func(p Phase) float64 { return p.Latency.P50 }),
		P90:  pick(func(p Phase) float64 { return p.Latency.P90 }),
		P99:  pick(func(p Phase) float64 { return p.Latency.P99 }),
		P999: pick(func(p Phase) float64 { return p.Latency.P999 }),
		Max:  pick(func(p Phase) float64 { return p.Latency.Max }),
	}
	out.AttemptsPerCall = pick(func(p Phase) float64 { return p.AttemptsPerCall })
	out.CPUPerCallMicros = pick(func(p Phase) float64 { return p.CPUPerCallMicros })
	out.AllocsPerCall = pick(func(p Phase) float64 { return p.AllocsPerCall })
	out.AllocBytesPerCall = pick(func(p Phase) float64 { return p.AllocBytesPerCall })
	return out
}

// summarise fills the medians and ratios from r.Runs.
func (r *Report) summarise() {
	byName := map[string][]Phase{}
	for _, p := range r.Runs {
		byName[p.Name] = append(byName[p.Name], p)
	}
	r.Pool = medianPhase(byName[PhasePool])
	for _, f := range frontPhases {
		if ps := byName[f.phase]; len(ps) > 0 {
			r.Fronts = append(r.Fronts, medianPhase(ps))
		}
	}
	// The baseline never fails: with failures injected, the pool is
	// compared with it through its run without them.
	like := byName[PhasePool]
	if nf := byName[PhasePoolNoFailures]; len(nf) > 0 {
		like = nf
	}
	if ps := byName[PhaseBaseline]; len(ps) > 0 {
		b := medianPhase(ps)
		r.Baseline = &b
		var tp, p50, p90, p99, p999, cpu []float64
		for i, base := range ps {
			pl := like[i]
			tp = append(tp, ratio(pl.CallsPerSec, base.CallsPerSec))
			p50 = append(p50, ratio(pl.Latency.P50, base.Latency.P50))
			p90 = append(p90, ratio(pl.Latency.P90, base.Latency.P90))
			p99 = append(p99, ratio(pl.Latency.P99, base.Latency.P99))
			p999 = append(p999, ratio(pl.Latency.P999, base.Latency.P999))
			cpu = append(cpu, ratio(pl.CPUPerCallMicros, base.CPUPerCallMicros))
		}
		r.Ratios = &Ratios{
			Throughput: Median(tp), P50: Median(p50), P90: Median(p90),
			P99: Median(p99), P999: Median(p999), CPUPerCall: Median(cpu),
		}
	}
	if ps := byName[PhasePoolNoFailures]; len(ps) > 0 {
		nf := medianPhase(ps)
		r.PoolNoFailures = &nf
		var xs []float64
		for i, p := range ps {
			xs = append(xs, ratio(byName[PhasePool][i].CallsPerSec, p.CallsPerSec))
		}
		fr := Median(xs)
		r.FailureThroughputRatio = &fr
	}
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteText writes r as a table for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	r.writeHeader(&b)
	if err := r.writeTable(&b); err != nil {
		return err
	}
	r.writeSummary(&b)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHeader says what was loaded, on what, and on which machine.
func (r *Report) writeHeader(b *strings.Builder) {
	s := r.Settings
	load := "closed loop"
	if s.Rate > 0 {
		load = fmt.Sprintf("open loop at %s calls/s", thousands(s.Rate))
	}
	size := fmt.Sprintf("%d calls", s.Calls)
	if s.Calls == 0 {
		size = fmt.Sprintf("%gs", s.DurationSeconds)
	}
	tool := fmt.Sprintf("echo, %d-byte input", s.Payload)
	if s.Tool == ToolSleep {
		tool = fmt.Sprintf("sleep %gms", s.SleepMillis)
	}
	workers := fmt.Sprintf("%d in-process worker(s) × %d", s.Workers, s.WorkerConcurrency)
	if s.Workers == 0 {
		workers = "external workers"
	}
	fmt.Fprintf(b, "toolpool bench: %s per phase, %s, %d agents, %d call(s) per turn, %s\n", size, tool, s.Concurrency, s.Batch, load)
	fmt.Fprintf(b, "server: %s, %s storage; %s; messages: call %d B, result %d B", s.Server, s.Storage, workers, s.CallBytes, s.ResultBytes)
	if s.Fail != "" {
		fmt.Fprintf(b, "; failures: %s", s.Fail)
	}
	if s.Rounds > 1 {
		fmt.Fprintf(b, "; medians of %d rounds", s.Rounds)
	}
	fmt.Fprintf(b, "\nmachine: %d CPU(s), %s, %s\n\n", r.Machine.CPUs, cmp.Or(r.Machine.CPUModel, "unknown CPU"), r.Machine.GoVersion)
}

// writeTable writes a row per phase, the ratios to the baseline, and the
// pool's errors by class.
func (r *Report) writeTable(b *strings.Builder) error {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tcalls/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tattempts/call\terrors\tCPU µs/call\tpeak RSS\t")
	row := func(p *Phase) {
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%.1f\t%s\t\n", p.Name, thousands(p.CallsPerSec),
			p.Latency.P50, p.Latency.P90, p.Latency.P99, p.Latency.P999, p.Latency.Max,
			p.AttemptsPerCall, p.ErrorCalls, p.CPUPerCallMicros, mib(p.PeakRSSBytes))
	}
	if r.Baseline != nil {
		row(r.Baseline)
	}
	if r.PoolNoFailures != nil {
		row(r.PoolNoFailures)
	}
	row(&r.Pool)
	for i := range r.Fronts {
		row(&r.Fronts[i])
	}
	if q := r.Ratios; q != nil {
		label := "pool/baseline"
		if r.PoolNoFailures != nil {
			label = "pool_no_failures/baseline"
		}
		fmt.Fprintf(tw, label+"\t%.2fx\t%.2fx\t%.2fx\t%.2fx\t%.2fx\t\t\t\t%.2fx\t\t\n",
			q.Throughput, q.P50, q.P90, q.P99, q.P999, q.CPUPerCall)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Pool.Errors) > 0 {
		fmt.Fprintf(b, "\npool errors by class:")
		for _, c := range slices.Sorted(maps.Keys(r.Pool.Errors)) {
			fmt.Fprintf(b, " %s=%d", c, r.Pool.Errors[c])
		}
		fmt.Fprintln(b)
	}
	return nil
}

// writeSummary writes the headline, the front doors, the cost of the
// failures and the peak RSS.
func (r *Report) writeSummary(b *strings.Builder) {
	b.WriteString("\n")
	if q := r.Ratios; q != nil {
		fmt.Fprintf(b, "headline: the pool runs at %.0f%% of raw JetStream's throughput in the same run; latency p50 %.2fx, p99 %.2fx of raw",
			q.Throughput*100, q.P50, q.P99)
		if r.PoolNoFailures != nil {
			b.WriteString(" (both without failures)")
		}
		b.WriteString(".\n")
	}
	r.writeFronts(b)
	if r.FailureThroughputRatio != nil {
		fmt.Fprintf(b, "with failures (%s) the pool keeps %.0f%% of its throughput without them.\n", r.Settings.Fail, *r.FailureThroughputRatio*100)
	}
	fmt.Fprintf(b, "peak RSS of the bench process: %s", mib(r.PeakRSSBytes))
	if r.Settings.Server == "embedded" {
		b.WriteString(" (the embedded server included)")
	}
	b.WriteString("\n")
}

func mib(b uint64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

// thousands formats a rate with thin grouping: 12,345.
func thousands(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	n := len(s)
	if n <= 3 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (n-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// writeFronts says how the front doors compare: each with direct
// dispatch, and MCP with the HTTP API when both ran.
func (r *Report) writeFronts(b *strings.Builder) {
	byName := map[string]*Phase{}
	for i := range r.Fronts {
		p := &r.Fronts[i]
		byName[p.Name] = p
		fmt.Fprintf(b, "front %s: %.0f%% of direct dispatch's throughput; p50 %+.2f ms.\n",
			p.Name, ratio(p.CallsPerSec, r.Pool.CallsPerSec)*100, p.Latency.P50-r.Pool.Latency.P50)
	}
	h := byName[PhasePoolHTTP]
	for _, mcp := range []struct{ phase, client string }{{PhasePoolMCP, "lean load generator"}, {PhasePoolMCPSDK, "go-sdk client"}} {
		if m := byName[mcp.phase]; h != nil && m != nil {
			fmt.Fprintf(b, "MCP front (%s): %.0f%% of the HTTP API's throughput; p50 %+.2f ms over it.\n",
				mcp.client, ratio(m.CallsPerSec, h.CallsPerSec)*100, m.Latency.P50-h.Latency.P50)
		}
	}
}
