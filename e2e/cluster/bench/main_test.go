package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The bench user is added to the deployment's accounts.conf where the
// toolpool account's users begin: a change of that file that moves the
// anchor fails here, not in the middle of a measurement.
func TestWriteConfig(t *testing.T) {
	dir := t.TempDir()
	if err := writeConfig(dir); err != nil {
		t.Fatal(err)
	}
	acc, err := os.ReadFile(filepath.Join(dir, "accounts.conf"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(acc), "TOOLPOOL: {")
	j := strings.Index(string(acc), "{ user: bench, password: $BENCH_PASSWORD }")
	k := strings.Index(string(acc), "user: orchestrator")
	if i < 0 || j < i || k < j {
		t.Errorf("the bench user is not the first of the toolpool account's users:\n%s", acc)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "cluster.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "include ./accounts.conf") || !strings.Contains(string(conf), "prof_port: $PROF_PORT") {
		t.Errorf("cluster.conf:\n%s", conf)
	}
}

// A small run of the whole command: three servers, one worker process,
// both phases measured with their processes' figures.
func TestRun(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Fatalf("the cluster bench needs /proc: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	err := run(ctx, []string{"--calls", "300", "--concurrency", "16", "--rounds", "1", "--workers", "1", "--worker-concurrency", "32", "--json", jsonPath}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"1 worker(s): pool/raw throughput", "leaders: calls nats-1, results nats-1, work consumer nats-1", "bench-orchestrator@nats-1"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var out output
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Runs) != 1 || len(out.Runs[0].Phases) != 2 {
		t.Fatalf("runs %+v", out.Runs)
	}
	for _, st := range out.Runs[0].Phases {
		if st.CPUSeconds["nats-1"] <= 0 || st.RouteMsgs == 0 || st.CallsStored < 300 || st.ResultsStored < 300 {
			t.Errorf("%s: CPU %v, %d route messages, %d calls and %d results stored", st.Phase, st.CPUSeconds, st.RouteMsgs, st.CallsStored, st.ResultsStored)
		}
	}
	if pool := out.Runs[0].Phases[1]; pool.Phase != "pool" || pool.CPUSeconds["worker-1"] <= 0 {
		t.Errorf("pool phase %+v", pool)
	}
}
