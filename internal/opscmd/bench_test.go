package opscmd

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// runBench runs "orchestrator bench" with args and returns its exit code,
// stdout and stderr.
func runBench(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append([]string{"bench"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// benchPhase is a phase of the JSON report.
type benchPhase struct {
	Calls       int                `json:"calls"`
	CallsPerSec float64            `json:"calls_per_s"`
	Latency     map[string]float64 `json:"latency_ms"`
	Attempts    float64            `json:"attempts_per_call"`
	ErrorCalls  int                `json:"error_calls"`
	Errors      map[string]int     `json:"errors"`
}

// The smoke test: a short bench through the whole path, with its baseline,
// reported as JSON.
func TestBenchJSON(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runBench(t, "--calls", "300", "--concurrency", "16", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	var rep struct {
		Machine struct {
			CPUs int `json:"cpus"`
		} `json:"machine"`
		Settings struct {
			Server string `json:"server"`
			Calls  int    `json:"calls"`
			Tool   string `json:"tool"`
		} `json:"settings"`
		Baseline benchPhase `json:"baseline"`
		Pool     benchPhase `json:"pool"`
		Ratios   struct {
			Throughput float64 `json:"throughput"`
			P50        float64 `json:"p50"`
			P99        float64 `json:"p99"`
		} `json:"ratios"`
		PeakRSS int64 `json:"peak_rss_bytes"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	if rep.Machine.CPUs < 1 || rep.Settings.Server != "embedded" || rep.Settings.Calls != 300 || rep.Settings.Tool != "echo" {
		t.Errorf("machine/settings: %+v %+v", rep.Machine, rep.Settings)
	}
	for name, p := range map[string]benchPhase{"baseline": rep.Baseline, "pool": rep.Pool} {
		if p.Calls != 300 || p.ErrorCalls != 0 || len(p.Errors) != 0 || p.Attempts != 1 || p.CallsPerSec <= 0 {
			t.Errorf("%s: %+v", name, p)
		}
		for _, q := range []string{"p50", "p90", "p99", "p99_9", "max"} {
			if p.Latency[q] <= 0 {
				t.Errorf("%s: latency %s is %v", name, q, p.Latency[q])
			}
		}
	}
	if rep.Ratios.Throughput <= 0 || rep.Ratios.P50 <= 0 || rep.Ratios.P99 <= 0 {
		t.Errorf("ratios %+v", rep.Ratios)
	}
	if rep.PeakRSS <= 0 {
		t.Errorf("peak RSS %d", rep.PeakRSS)
	}
}

func TestBenchTable(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runBench(t, "--calls", "100", "--concurrency", "8", "--fail", "transient=0.3")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	for _, want := range []string{"baseline", "pool_no_failures", "pool_no_failures/baseline", "headline:", "(both without failures)", "with failures (transient=0.3)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("progress bar drawn on a stderr that is not a terminal: %q", stderr)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--fail", "transient=2"}, "--fail"},
		{[]string{"--workers", "0"}, "--workers 0 needs --nats-url"},
		{[]string{"--calls", "10", "--duration", "1s"}, "not both"},
		{[]string{"--storage", "tape"}, "--storage"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--scenario", "chaos"}, "--scenario"},
		{[]string{"--key-cap", "4"}, "--key-cap applies to --scenario noisy-neighbour only"},
		{[]string{"--scenario", "noisy-neighbour", "--front", "http"}, "--front does not apply"},
		{[]string{"--scenario", "noisy-neighbour", "--backlog", "0"}, "--backlog"},
		{[]string{"--scenario", "noisy-neighbour", "--backlog", "10", "--backlog-turn", "11"}, "--backlog-turn must be from 1 to --backlog"},
		{[]string{"--key-rate-for", "2s"}, "--key-rate-for applies to --scenario noisy-neighbour only"},
		{[]string{"--scenario", "noisy-neighbour", "--key-cap-calls", "0"}, "--key-cap-calls must be at least 1"},
		{[]string{"--scenario", "noisy-neighbour", "--key-rate-for", "1s"}, "--key-rate-for must be more than 1s"},
	} {
		code, _, stderr := runBench(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("bench %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// backlogPhase is a backlog phase of the noisy-neighbour report.
type backlogPhase struct {
	Calls       int     `json:"calls"`
	Errors      int     `json:"errors"`
	CallsPerSec float64 `json:"calls_per_s"`
}

// The noisy-neighbour scenario, small: every phase runs and reports its
// figures and its target (whether a target is met is the scheduler's
// business and the machine's, not this test's).
func TestBenchNoisyNeighbourJSON(t *testing.T) {
	t.Parallel()
	// Small phases: a 100-call backlog, 200 calls of each tenant under the
	// cap, 2 s of offered calls (400) under the rate limit.
	code, stdout, stderr := runBench(t, "--scenario", "noisy-neighbour", "--backlog", "100", "--backlog-turn", "7", "--calls", "400",
		"--concurrency", "32", "--workers", "2", "--worker-concurrency", "4", "--b-interval", "20ms",
		"--key-cap-calls", "200", "--key-rate-for", "2s", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	var rep struct {
		Settings struct {
			Scenario  string  `json:"scenario"`
			Slots     int     `json:"slots"`
			SleepMS   float64 `json:"sleep_ms"`
			Admission string  `json:"admission"`
			Turn      int     `json:"backlog_turn"`
			CapCalls  int     `json:"cap_calls_per_key"`
			RateFor   float64 `json:"rate_for_s"`
		} `json:"settings"`
		AAlone backlogPhase `json:"a_alone"`
		WithB  backlogPhase `json:"a_with_b"`
		B      struct {
			Calls   int                `json:"calls"`
			Latency map[string]float64 `json:"latency_ms"`
		} `json:"b"`
		Cap struct {
			MaxRunning map[string]int `json:"max_running"`
		} `json:"cap"`
		Rate struct {
			Calls, Served int
		} `json:"rate"`
		FairnessOff benchPhase `json:"fairness_off"`
		FairnessOn  benchPhase `json:"fairness_on"`
		Targets     []struct {
			Name string `json:"name"`
			Goal string `json:"goal"`
		} `json:"targets"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	if s := rep.Settings; s.Scenario != "noisy-neighbour" || s.Slots != 8 || s.SleepMS != 20 || s.Admission == "" || s.Turn != 7 ||
		s.CapCalls != 200 || s.RateFor != 2 {
		t.Errorf("settings %+v", s)
	}
	for name, p := range map[string]backlogPhase{"a_alone": rep.AAlone, "a_with_b": rep.WithB} {
		if p.Calls != 200 || p.Errors != 0 || p.CallsPerSec <= 0 { // twice the backlog
			t.Errorf("%s: %+v", name, p)
		}
	}
	if rep.B.Calls < 1 || rep.B.Latency["p99"] <= 0 {
		t.Errorf("b: %+v", rep.B)
	}
	if rep.Cap.MaxRunning["A"] < 1 || rep.Cap.MaxRunning["C"] < 1 {
		t.Errorf("cap: %+v", rep.Cap)
	}
	if rep.Rate.Calls != 400 || rep.Rate.Served < 1 {
		t.Errorf("rate: %+v", rep.Rate)
	}
	for name, p := range map[string]benchPhase{"fairness_off": rep.FairnessOff, "fairness_on": rep.FairnessOn} {
		if p.Calls != 400 || p.ErrorCalls != 0 || p.CallsPerSec <= 0 {
			t.Errorf("%s: %+v", name, p)
		}
	}
	if len(rep.Targets) != 5 {
		t.Errorf("targets: %+v", rep.Targets)
	}
}
