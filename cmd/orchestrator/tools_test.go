package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// toolsOutput runs "orchestrator tools" against url and decodes its output.
func toolsOutput(t *testing.T, url string, args ...string) []map[string]any {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), append([]string{"tools", "--nats-url", url}, args...), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("orchestrator tools: exit %d\n%s", code, stderr.String())
	}
	var out []map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, stdout.String())
	}
	return out
}

func toolNames(out []map[string]any) []string {
	var names []string
	for _, tool := range out {
		names = append(names, tool["name"].(string))
	}
	return names
}

// announceWorker announces the demo tools named for workerID, on a
// connection of its own (closing it kills the "worker").
func announceWorker(t *testing.T, url, workerID string, names ...string) (*discovery.Announcer, func()) {
	t.Helper()
	nc := natstest.Connect(t, url)
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	if err := demo.Register(reg); err != nil {
		t.Fatal(err)
	}
	a, err := discovery.NewAnnouncer(discovery.AnnouncerConfig{
		JetStream: j, Registry: reg, Tools: names, WorkerID: workerID, Logger: natstest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A "killed" worker only loses its connection; its heartbeat goroutine
	// still runs in this process until Stop.
	t.Cleanup(func() { _ = a.Stop(context.Background()) })
	return a, nc.Close
}

// waitFor polls "orchestrator tools" until its names are want; a timeout
// logs the names it listed last.
func waitFor(t *testing.T, url string, want ...string) {
	t.Helper()
	var got []string
	defer func() {
		if !slices.Equal(got, want) {
			t.Logf("orchestrator tools lists %v, want %v", got, want)
		}
	}()
	natstest.Eventually(t, 30*time.Second, fmt.Sprintf("orchestrator tools to list %v", want), func() bool {
		got = toolNames(toolsOutput(t, url))
		return slices.Equal(got, want)
	})
}

func TestToolsCommand(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	url := srv.ClientURL()
	// A short TTL, so a killed worker's tools expire quickly.
	j, err := js.New(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := discovery.OpenBucket(t.Context(), j, discovery.BucketConfig{TTL: time.Second}); err != nil {
		t.Fatal(err)
	}

	if out := toolsOutput(t, url); len(out) != 0 {
		t.Errorf("no workers, yet tools %v", out)
	}
	a1, _ := announceWorker(t, url, "w1", "echo", "sleep")
	_, kill2 := announceWorker(t, url, "w2", "echo", "flaky")

	// Two workers announce echo: one definition, two workers.
	out := toolsOutput(t, url)
	if got := toolNames(out); !slices.Equal(got, []string{"echo", "flaky", "sleep"}) {
		t.Fatalf("tools %v", got)
	}
	echo := out[0]
	if len(echo) != 3 || echo["description"] == "" || echo["input_schema"].(map[string]any)["type"] != "object" {
		t.Errorf("echo is not in the Anthropic tools format: %v", echo)
	}
	withWorkers := toolsOutput(t, url, "--workers")
	var ids []string
	for _, w := range withWorkers[0]["workers"].([]any) {
		ids = append(ids, w.(map[string]any)["worker_id"].(string))
	}
	if !slices.Equal(ids, []string{"w1", "w2"}) || withWorkers[0]["workers"].([]any)[0].(map[string]any)["timeout"] != "5s" {
		t.Errorf("workers of echo: %v", withWorkers[0]["workers"])
	}

	// GET /v1/tools reads the same live set.
	onc := natstest.Connect(t, url)
	if err := toolpool.Provision(t.Context(), onc, toolpool.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	orch, err := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: onc, NoPoisonWatcher: true, Logger: natstest.Logger(t)})
	if err == nil {
		err = orch.Start(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer orch.Stop(context.Background())
	hs := httptest.NewServer(orch.Handler())
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/v1/tools")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct{ Tools []tools.Definition }
	if err := json.Unmarshal(body, &got); err != nil || len(got.Tools) != 3 || got.Tools[0].Name != "echo" {
		t.Errorf("GET /v1/tools: %v %s", err, body)
	}

	// w1 stops cleanly: sleep is gone, echo stays (w2 serves it).
	if err := a1.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, url, "echo", "flaky")
	// w2 dies without a word: its tools expire with their TTL.
	kill2()
	waitFor(t, url)
	resp, err = http.Get(hs.URL + "/v1/tools")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(bytes.TrimSpace(body)) != `{"tools":[]}` {
		t.Errorf("GET /v1/tools with no workers: %s", body)
	}
}

func TestToolsCommandUsage(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"tools", "extra"}, &stdout, &stderr); code != 2 {
		t.Errorf("extra argument: exit %d", code)
	}
	if code := run(t.Context(), []string{"tools", "--nats-url", "nats://127.0.0.1:1", "--timeout", "2s"}, &stdout, &stderr); code != 2 {
		t.Errorf("no server: exit %d", code)
	}
}

func TestServeToolsFlag(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	f, err := parseServe([]string{"--tools", "tools.yaml", "--discovery-ttl", "5s", "--replicas", "3"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if b := f.catalog.Bucket(); f.catalog.Path != "tools.yaml" || b.TTL != 5*time.Second || b.Replicas != 3 {
		t.Errorf("catalog flags %+v, bucket %+v", f.catalog, b)
	}
	// With an external server and no in-process workers, nothing would serve
	// the catalog.
	if _, err := parseServe([]string{"--tools", "tools.yaml", "--nats-url", "nats://127.0.0.1:4222"}, &stderr); err == nil ||
		!strings.Contains(err.Error(), "--tools needs in-process workers") {
		t.Errorf("--tools without workers: %v", err)
	}
}
