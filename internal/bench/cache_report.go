package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// CacheReport is what RunCache measured.
type CacheReport struct {
	Machine  Machine       `json:"machine"`
	Settings CacheSettings `json:"settings"`
	// NoCache is the calls sent straight to the dispatcher; Cache the same
	// calls through the policy gate with the result cache.
	NoCache CachePhase `json:"no_cache"`
	Cache   CachePhase `json:"cache"`
	// Speedup is Cache's throughput over NoCache's.
	Speedup float64 `json:"speedup"`
	// ExecutionsSaved is the share of NoCache's executions of the tool
	// that Cache did not run.
	ExecutionsSaved float64 `json:"executions_saved"`
	// PeakRSSBytes is the peak resident set size of the whole run.
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
}

// CacheSettings echo the scenario's configuration.
type CacheSettings struct {
	Scenario          string  `json:"scenario"`
	Storage           string  `json:"storage"`
	Repeat            float64 `json:"repeat"`
	Calls             int     `json:"calls"`
	DistinctInputs    int     `json:"distinct_inputs"`
	Concurrency       int     `json:"concurrency"`
	Workers           int     `json:"workers"`
	WorkerConcurrency int     `json:"worker_concurrency"`
	SleepMillis       float64 `json:"sleep_ms"`
	TTLSeconds        float64 `json:"ttl_s"`
}

// CachePhase is one phase of the cache scenario.
type CachePhase struct {
	Name       string  `json:"name"`
	Calls      int     `json:"calls"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"calls_per_s"`
	P50Millis  float64 `json:"p50_ms"`
	P99Millis  float64 `json:"p99_ms"`
	// Executions is how many times the tool ran (counted by the tool).
	Executions int64 `json:"executions"`
	// Hits, Misses and Coalesced are the gate's cache outcomes (0 without
	// the cache).
	Hits      int `json:"hits"`
	Misses    int `json:"misses"`
	Coalesced int `json:"coalesced"`
	// Errors is the calls that failed (at most 1 % or the run fails).
	Errors int `json:"errors"`
}

// The scenario's name in reports.
const scenarioCache = "cache"

func (c CacheConfig) settings(distinct int) CacheSettings {
	return CacheSettings{
		Scenario: scenarioCache, Storage: storageName(c.Storage), Repeat: c.Repeat, Calls: c.Calls,
		DistinctInputs: distinct, Concurrency: c.Concurrency, Workers: c.Workers,
		WorkerConcurrency: c.WorkerConcurrency, SleepMillis: ms(c.Sleep), TTLSeconds: c.TTL.Seconds(),
	}
}

// finish computes the ratios.
func (r *CacheReport) finish() {
	if r.NoCache.Throughput > 0 {
		r.Speedup = r.Cache.Throughput / r.NoCache.Throughput
	}
	if r.NoCache.Executions > 0 {
		r.ExecutionsSaved = 1 - float64(r.Cache.Executions)/float64(r.NoCache.Executions)
	}
	r.PeakRSSBytes = PeakRSS()
}

// WriteJSON writes the report as indented JSON.
func (r *CacheReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as a table.
func (r *CacheReport) WriteText(w io.Writer) error {
	s := r.Settings
	fmt.Fprintf(w, "result cache: %d calls of %s (%.0f ms each), %.0f %% repeating an earlier input (%d distinct), %d agents, %d×%d worker slots, %s storage\n\n",
		s.Calls, ToolCached, s.SleepMillis, 100*s.Repeat, s.DistinctInputs, s.Concurrency, s.Workers, s.WorkerConcurrency, s.Storage)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tcalls/s\tp50 ms\tp99 ms\texecutions\thits\tcoalesced\tmisses\terrors\t")
	for _, p := range []CachePhase{r.NoCache, r.Cache} {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%d\t%d\t%d\t%d\t%d\t\n",
			p.Name, p.Throughput, p.P50Millis, p.P99Millis, p.Executions, p.Hits, p.Coalesced, p.Misses, p.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nwith the cache: %.2f× the throughput, %.1f %% fewer executions of the tool\n", r.Speedup, 100*r.ExecutionsSaved)
	return err
}
