package opscmd

import (
	"encoding/json"
	"strings"
	"testing"
)

// The cache scenario, small: the same calls without the cache run the
// tool once per call, with it once per distinct input (the tool counts
// its executions), and every other call is a hit or coalesced.
func TestBenchCacheJSON(t *testing.T) {
	t.Parallel()
	code, stdout, stderr := runBench(t, "--repeat", "0.8", "--calls", "400", "--concurrency", "16", "--sleep", "5ms", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	type phase struct {
		Calls      int     `json:"calls"`
		Throughput float64 `json:"calls_per_s"`
		Executions int     `json:"executions"`
		Hits       int     `json:"hits"`
		Misses     int     `json:"misses"`
		Coalesced  int     `json:"coalesced"`
		Errors     int     `json:"errors"`
	}
	var rep struct {
		Settings struct {
			Scenario string  `json:"scenario"`
			Repeat   float64 `json:"repeat"`
			Distinct int     `json:"distinct_inputs"`
		} `json:"settings"`
		NoCache phase   `json:"no_cache"`
		Cache   phase   `json:"cache"`
		Saved   float64 `json:"executions_saved"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, stdout)
	}
	s, n, c := rep.Settings, rep.NoCache, rep.Cache
	if s.Scenario != "cache" || s.Repeat != 0.8 || s.Distinct < 40 || s.Distinct > 160 {
		t.Fatalf("settings %+v: want about 80 distinct inputs of 400", s)
	}
	if n.Calls != 400 || n.Executions != 400 || n.Hits+n.Misses+n.Coalesced != 0 || n.Errors != 0 || n.Throughput <= 0 {
		t.Errorf("no cache: %+v", n)
	}
	if c.Calls != 400 || c.Executions != s.Distinct || c.Misses != s.Distinct || c.Hits+c.Coalesced+c.Misses != 400 || c.Errors != 0 {
		t.Errorf("cache: %+v; want %d executions and misses, the rest hits or coalesced", c, s.Distinct)
	}
	if want := 1 - float64(s.Distinct)/400; rep.Saved < want-1e-9 || rep.Saved > want+1e-9 {
		t.Errorf("executions saved %v, want %v", rep.Saved, want)
	}
}

func TestBenchCacheUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--repeat", "0"}, "--repeat 0: want the share"},
		{[]string{"--repeat", "1.5"}, "--repeat 1.5"},
		{[]string{"--repeat", "-0.2"}, "--repeat -0.2"},
		{[]string{"--repeat", "0.8", "--front", "http"}, "--front does not apply with --repeat"},
		{[]string{"--repeat", "0.8", "--key-cap", "3"}, "--key-cap does not apply with --repeat"},
		{[]string{"--repeat", "0.8", "--scenario", "noisy-neighbour"}, "--repeat does not apply to --scenario noisy-neighbour"},
		{[]string{"--repeat", "0.8", "--calls", "0"}, "--calls must be at least 1"},
		{[]string{"--repeat", "0.8", "--sleep", "-1s"}, "--sleep must not be negative"},
		{[]string{"--repeat", "x"}, "repeat"},
	} {
		code, _, stderr := runBench(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("bench %v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
