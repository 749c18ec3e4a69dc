package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// run runs a small bench and fails the test on error.
func run(t *testing.T, cfg Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

func TestRunWithBaseline(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{Calls: 300, Concurrency: 16, Batch: 2, WorkerConcurrency: 32, Warmup: 50})
	if rep.Baseline == nil || rep.Ratios == nil {
		t.Fatalf("no baseline or ratios: %+v", rep)
	}
	if rep.PoolNoFailures != nil || rep.FailureThroughputRatio != nil {
		t.Errorf("a run without failures has a no-failure reference: %+v", rep.PoolNoFailures)
	}
	for _, p := range []*Phase{rep.Baseline, &rep.Pool} {
		if p.Calls != 300 || p.Turns != 150 {
			t.Errorf("%s: %d calls in %d turns, want 300 in 150", p.Name, p.Calls, p.Turns)
		}
		if p.ErrorCalls != 0 || len(p.Errors) != 0 {
			t.Errorf("%s: errors %v", p.Name, p.Errors)
		}
		if p.AttemptsPerCall != 1 {
			t.Errorf("%s: %v attempts per call, want 1", p.Name, p.AttemptsPerCall)
		}
		l := p.Latency
		if !(p.CallsPerSec > 0 && l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
			t.Errorf("%s: rate %v, latency %+v", p.Name, p.CallsPerSec, l)
		}
	}
	if q := rep.Ratios; q.Throughput <= 0 || q.P50 <= 0 || q.P99 <= 0 {
		t.Errorf("ratios %+v", q)
	}
	s := rep.Settings
	if s.Server != "embedded" || s.Storage != "file" || s.Workers != 1 || s.CallBytes < 256 || s.ResultBytes < 256 {
		t.Errorf("settings %+v", s)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].Name != PhaseBaseline || rep.Runs[1].Name != PhasePool {
		t.Errorf("runs: %+v", rep.Runs)
	}

	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"baseline", "pool/baseline", "calls/s", "p99.9 ms", "headline: the pool runs at"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON report: %v", err)
	}
	for _, k := range []string{"machine", "settings", "baseline", "pool", "ratios", "peak_rss_bytes", "runs"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
}

// Transient failures are retried until they succeed; permanent ones end
// in is_error at once; the run also measures the pool without failures.
func TestRunWithFailures(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{
		Calls: 200, Concurrency: 32, SkipBaseline: true, Warmup: -1,
		Fail: FailMix{Transient: 0.5, Permanent: 0.2}, TransientBaseDelay: 10 * time.Millisecond,
	})
	if rep.Baseline != nil || rep.Ratios != nil {
		t.Errorf("baseline ran though skipped")
	}
	if rep.PoolNoFailures == nil || rep.FailureThroughputRatio == nil || *rep.FailureThroughputRatio <= 0 {
		t.Fatalf("no reference without failures")
	}
	if nf := rep.PoolNoFailures; nf.ErrorCalls != 0 || nf.AttemptsPerCall != 1 {
		t.Errorf("reference: %d errors, %v attempts per call", nf.ErrorCalls, nf.AttemptsPerCall)
	}
	p := rep.Pool
	perm := p.Errors["permanent"]
	if perm == 0 || perm != p.ErrorCalls {
		t.Errorf("errors %v: want only permanent ones, and some", p.Errors)
	}
	// About half the calls fail once: 1.5 attempts per call, give or take.
	if p.AttemptsPerCall < 1.2 || p.AttemptsPerCall > 1.8 {
		t.Errorf("%v attempts per call, want about 1.5", p.AttemptsPerCall)
	}
}

func TestRunOpenLoopForADuration(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{Duration: 500 * time.Millisecond, Rate: 400, Concurrency: 8, Tool: ToolSleep, Sleep: time.Millisecond, Warmup: 20})
	p := rep.Pool
	// 400 calls/s for half a second: about 200 calls.
	if p.Calls < 150 || p.Calls > 210 || p.ErrorCalls != 0 {
		t.Errorf("%d calls, %d errors; want about 200 and none", p.Calls, p.ErrorCalls)
	}
	if rep.Settings.Tool != ToolSleep || rep.Settings.SleepMillis != 1 || rep.Settings.Rate != 400 {
		t.Errorf("settings %+v", rep.Settings)
	}
}

func TestRunRoundsReportsMedians(t *testing.T) {
	t.Parallel()
	rep := run(t, Config{Calls: 100, Concurrency: 8, Rounds: 3, Warmup: -1})
	if len(rep.Runs) != 6 {
		t.Fatalf("%d runs, want 6", len(rep.Runs))
	}
	var rates []float64
	for _, p := range rep.Runs {
		if p.Name == PhasePool {
			rates = append(rates, p.CallsPerSec)
		}
	}
	if rep.Pool.CallsPerSec != Median(rates) || rep.Pool.Calls != 300 {
		t.Errorf("pool summary: %v calls/s (rounds %v), %d calls", rep.Pool.CallsPerSec, rates, rep.Pool.Calls)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := Run(context.Background(), Config{Tool: "nope"}); err == nil || !strings.Contains(err.Error(), `tool "nope"`) {
		t.Errorf("Run with a bad tool: %v", err)
	}
}

// TestFronts: with --front http,mcp,mcp-sdk the pool is also loaded
// through the HTTP API and MCP (the lean load generator and the go-sdk
// client) in the same run, batches included; the report compares them with
// direct dispatch and with each other.
func TestFronts(t *testing.T) {
	t.Parallel()
	fronts, err := ParseFronts("direct, mcp,http,mcp, MCP-SDK")
	if err != nil || strings.Join(fronts, ",") != "mcp,http,mcp-sdk" {
		t.Fatalf("ParseFronts = %v, %v", fronts, err)
	}
	if _, err := ParseFronts("grpc"); err == nil {
		t.Error("ParseFronts(grpc) is no error")
	}
	var direct, httpProf, mcpProf, sdkProf bytes.Buffer
	rep := run(t, Config{Calls: 200, Concurrency: 8, Batch: 2, WorkerConcurrency: 32, Warmup: 20, SkipBaseline: true, Fronts: fronts,
		CPUProfile: &direct, FrontCPUProfiles: map[string]io.Writer{FrontHTTP: &httpProf, FrontMCP: &mcpProf, FrontMCPSDK: &sdkProf}})
	// Each phase's profile in its own writer: one gzip member each, not
	// the phases' profiles one after the other.
	for name, b := range map[string]*bytes.Buffer{"pool": &direct, "http": &httpProf, "mcp": &mcpProf, "mcp-sdk": &sdkProf} {
		r := bytes.NewReader(b.Bytes())
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Errorf("%s CPU profile: %v", name, err)
			continue
		}
		zr.Multistream(false)
		if _, err := io.Copy(io.Discard, zr); err != nil || r.Len() != 0 {
			t.Errorf("%s CPU profile: %v, %d bytes after the first profile", name, err, r.Len())
		}
	}
	if len(rep.Fronts) != 3 {
		t.Fatalf("fronts %+v", rep.Fronts)
	}
	for _, p := range rep.Fronts {
		if p.Calls != 200 || p.Turns != 100 || p.ErrorCalls != 0 || !(p.CallsPerSec > 0 && p.Latency.P50 > 0) {
			t.Errorf("%s: %d calls in %d turns, errors %v, rate %v, p50 %v", p.Name, p.Calls, p.Turns, p.Errors, p.CallsPerSec, p.Latency.P50)
		}
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pool_http", "pool_mcp ", "pool_mcp_sdk", "MCP front (lean load generator):", "MCP front (go-sdk client):", "of direct dispatch's throughput"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
}
