package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/internal/infra/metrics"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/internal/promtest"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
	"github.com/toolpool/toolpool/pkg/tools/demo"
)

// waitLong bounds every wait for something that should happen: generous,
// because the machine is shared and the tests run with -race.
const waitLong = 60 * time.Second

// eventually polls cond until it holds, failing the test after waitLong.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	natstest.Eventually(t, waitLong, what, cond)
}

// fastTools are the demo tools, flaky retrying after milliseconds instead
// of seconds.
func fastTools(t *testing.T) *tools.Registry {
	t.Helper()
	flaky := demo.Flaky()
	flaky.Retry = classify.Policy{BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond}
	reg := tools.NewRegistry()
	for _, tool := range []tools.Tool{demo.Echo(), demo.Sleep(), flaky} {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// startWorker starts a worker serving reg on a connection of its own to
// url, observed by m; it stops when the test ends.
func startWorker(t *testing.T, url string, reg *tools.Registry, m worker.Metrics) {
	t.Helper()
	pooltest.StartServer(t, url, reg, func(c *pooltest.ServerConfig) { c.Worker.Metrics = m })
}

// TestScriptedMixCounts runs a scripted mix of calls through a real worker
// and dispatcher on JetStream, then checks that a real scrape counts
// exactly what happened.
func TestScriptedMixCounts(t *testing.T) {
	t.Parallel()
	srv, _, j := natstest.StartProvisioned(t)
	reg := fastTools(t)
	mreg := metrics.NewRegistry()
	wm, err := metrics.NewWorker(mreg, metrics.WorkerOptions{Tools: reg.Names()})
	if err != nil {
		t.Fatal(err)
	}
	dm, err := metrics.NewDispatch(mreg, metrics.DispatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mreg.MustRegister(metrics.NewJetStreamCollector(j, metrics.JetStreamOptions{DeadLetters: dlq.Counts}))
	startWorker(t, srv.ClientURL(), reg, wm)
	d, err := dispatch.New(dispatch.Config{
		JS: j, Catalog: discovery.RegistryCatalog(reg), Metrics: dm, Logger: natstest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { stopped, stop := context.WithCancel(context.Background()); stop(); _ = d.Stop(stopped) }()
	hs := httptest.NewServer(metrics.Handler(mreg))
	defer hs.Close()

	// The mix. flaky's default policy allows 3 attempts.
	calls := []struct {
		tool, input string
		class       envelope.Class
	}{
		{"echo", `{"text":"hi"}`, envelope.ClassNone},                  // success
		{"sleep", `{"ms":"soon"}`, envelope.ClassValidation},           // validation error
		{"flaky", `{"fail":"503","times":1}`, envelope.ClassNone},      // transient, then success
		{"flaky", `{"fail":"503","times":5}`, envelope.ClassTransient}, // exhausted: dead letter
		{"flaky", `{"fail":"404"}`, envelope.ClassPermanent},           // permanent
		{"flaky", `{"fail":"panic"}`, envelope.ClassInternal},          // panic, recovered
		{"no_such_tool", `{}`, envelope.ClassValidation},               // unknown: never published
	}
	blocks := make([]envelope.ToolUseBlock, len(calls))
	for i, c := range calls {
		blocks[i] = envelope.ToolUseBlock{Type: "tool_use", ID: fmt.Sprintf("toolu_mix_%d", i), Name: c.tool, Input: json.RawMessage(c.input)}
	}
	results, err := d.Dispatch(ctx, "mix-session", blocks)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if r.Class != calls[i].class {
			t.Fatalf("call %d (%s %s): class %q, want %q: %s", i, calls[i].tool, calls[i].input, r.Class, calls[i].class, r.Content)
		}
	}

	// Workers record an outcome just after they answer, and JetStream
	// applies acks asynchronously: wait until both settled.
	var f promtest.Families
	var text []byte
	eventually(t, "the worker's outcomes and acks to settle", func() bool {
		text = promtest.Scrape(t, hs.URL)
		f = promtest.Parse(t, text)
		return f.Value("toolpool_worker_calls_finished_total") == 6 &&
			f.Value("toolpool_queue_ack_pending_calls") == 0 &&
			f.Value("toolpool_stream_messages", "stream", jetstream.StreamCalls) == 0
	})

	want := []struct {
		name   string
		labels []string
		value  float64
	}{
		// worker: finished calls by outcome and class
		{"toolpool_worker_calls_finished_total", []string{"tool", "echo", "outcome", "success", "class", "none"}, 1},
		{"toolpool_worker_calls_finished_total", []string{"tool", "sleep", "outcome", "error", "class", "validation"}, 1},
		{"toolpool_worker_calls_finished_total", []string{"tool", "flaky", "outcome", "success", "class", "none"}, 1},
		{"toolpool_worker_calls_finished_total", []string{"tool", "flaky", "outcome", "dead_letter", "class", "transient"}, 1},
		{"toolpool_worker_calls_finished_total", []string{"tool", "flaky", "outcome", "error", "class", "permanent"}, 1},
		{"toolpool_worker_calls_finished_total", []string{"tool", "flaky", "outcome", "error", "class", "internal"}, 1},
		// worker: attempts by class: flaky had 1+3 transient failures
		{"toolpool_worker_attempts_total", nil, 9},
		{"toolpool_worker_attempts_total", []string{"tool", "echo", "class", "none"}, 1},
		{"toolpool_worker_attempts_total", []string{"tool", "sleep", "class", "validation"}, 1},
		{"toolpool_worker_attempts_total", []string{"tool", "flaky", "class", "transient"}, 4},
		{"toolpool_worker_attempts_total", []string{"tool", "flaky", "class", "none"}, 1},
		{"toolpool_worker_attempts_total", []string{"tool", "flaky", "class", "permanent"}, 1},
		{"toolpool_worker_attempts_total", []string{"tool", "flaky", "class", "internal"}, 1},
		{"toolpool_worker_retry_delay_seconds_count", nil, 3},
		{"toolpool_worker_retry_delay_seconds_count", []string{"tool", "flaky"}, 3},
		{"toolpool_worker_execution_seconds_count", []string{"tool", "echo"}, 1},
		{"toolpool_worker_execution_seconds_count", []string{"tool", "sleep"}, 0}, // refused before running
		{"toolpool_worker_execution_seconds_count", []string{"tool", "flaky"}, 7},
		{"toolpool_worker_queue_wait_seconds_count", []string{"tool", "echo"}, 1},
		{"toolpool_worker_queue_wait_seconds_count", []string{"tool", "sleep"}, 1},
		{"toolpool_worker_queue_wait_seconds_count", []string{"tool", "flaky"}, 4},
		{"toolpool_worker_validation_failures_total", nil, 1},
		{"toolpool_worker_validation_failures_total", []string{"tool", "sleep"}, 1},
		{"toolpool_worker_dead_letters_total", nil, 1},
		{"toolpool_worker_dead_letters_total", []string{"tool", "flaky", "reason", "exhausted"}, 1},
		{"toolpool_worker_panics_total", nil, 1},
		{"toolpool_worker_panics_total", []string{"tool", "flaky"}, 1},
		{"toolpool_worker_handed_back_total", nil, 0},
		{"toolpool_worker_calls_in_flight", nil, 0},
		// orchestrator
		{"toolpool_dispatch_calls_total", nil, 6},
		{"toolpool_dispatch_calls_total", []string{"tool", "flaky"}, 4},
		{"toolpool_dispatch_results_total", nil, 6},
		{"toolpool_dispatch_results_total", []string{"tool", "echo", "class", "none"}, 1},
		{"toolpool_dispatch_results_total", []string{"tool", "sleep", "class", "validation"}, 1},
		{"toolpool_dispatch_results_total", []string{"tool", "flaky", "class", "none"}, 1},
		{"toolpool_dispatch_results_total", []string{"tool", "flaky", "class", "transient"}, 1},
		{"toolpool_dispatch_results_total", []string{"tool", "flaky", "class", "permanent"}, 1},
		{"toolpool_dispatch_results_total", []string{"tool", "flaky", "class", "internal"}, 1},
		{"toolpool_dispatch_duration_seconds_count", []string{"tool", "flaky"}, 4},
		{"toolpool_dispatch_duration_seconds_count", nil, 6},
		{"toolpool_dispatch_pending_calls", nil, 0},
		{"toolpool_dispatch_rejected_total", nil, 1},
		{"toolpool_dispatch_rejected_total", []string{"tool", metrics.UnknownTool, "code", "unknown_tool"}, 1},
		{"toolpool_dispatch_late_results_total", nil, 0},
		{"toolpool_dispatch_duplicate_results_total", nil, 0},
		{"toolpool_dispatch_expired_total", nil, 0},
		// JetStream, read at scrape time
		{"toolpool_jetstream_up", nil, 1},
		{"toolpool_dlq_messages", nil, 1},
		{"toolpool_dlq_messages", []string{"tool", "flaky"}, 1},
		{"toolpool_queue_pending_calls", nil, 0},
		{"toolpool_queue_redelivered_calls", nil, 0},
		{"toolpool_tool_paused", nil, 0},
		{"toolpool_stream_messages", []string{"stream", jetstream.StreamResults}, 6},
		{"toolpool_stream_messages", []string{"stream", jetstream.StreamDLQ}, 1},
	}
	for _, w := range want {
		if got := f.Value(w.name, w.labels...); got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
		}
	}
	for _, name := range []string{"toolpool_queue_pending_calls", "toolpool_tool_paused", "toolpool_queue_pull_requests"} {
		if got := f.LabelValues(name, "tool"); fmt.Sprint(got) != "[echo flaky sleep]" {
			t.Errorf("%s tools: %v, want [echo flaky sleep]", name, got)
		}
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if !f.Has(name) {
			t.Errorf("the scrape lacks the runtime metric %s", name)
		}
	}
	t.Run("promtool check metrics", func(t *testing.T) { promtest.CheckMetrics(t, text) })
}

// TestJetStreamCollectorOutage: while the server is down the collector
// reports toolpool_jetstream_up 0 and the scrape still succeeds; once the
// server is back on the same address and store, the queue metrics return.
func TestJetStreamCollectorOutage(t *testing.T) {
	t.Parallel()
	srv, _, j := natstest.StartProvisioned(t)
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Dir(srv.StoreDir())
	// Registered before the worker's cleanup, so it runs after it: the
	// worker stops while the (restarted) server is up.
	current := srv
	t.Cleanup(func() { current.Shutdown() })
	reg := fastTools(t)
	startWorker(t, srv.ClientURL(), reg, nil) // creates the consumers
	mreg := metrics.NewRegistry()
	mreg.MustRegister(metrics.NewJetStreamCollector(j, metrics.JetStreamOptions{Timeout: 500 * time.Millisecond, DeadLetters: dlq.Counts}))
	hs := httptest.NewServer(metrics.Handler(mreg))
	defer hs.Close()

	f := promtest.Parse(t, promtest.Scrape(t, hs.URL))
	if f.Value("toolpool_jetstream_up") != 1 || len(f.LabelValues("toolpool_queue_pending_calls", "tool")) != 3 {
		t.Fatalf("with the server up: up %v, tools %v", f.Value("toolpool_jetstream_up"), f.LabelValues("toolpool_queue_pending_calls", "tool"))
	}

	srv.Shutdown()
	f = promtest.Parse(t, promtest.Scrape(t, hs.URL))
	if got := f.Value("toolpool_jetstream_up"); got != 0 || !f.Has("toolpool_jetstream_up") {
		t.Errorf("with the server down: toolpool_jetstream_up = %v (present %v), want 0", got, f.Has("toolpool_jetstream_up"))
	}
	if f.Has("toolpool_queue_pending_calls") {
		t.Error("with the server down the scrape still shows queue metrics")
	}
	if !f.Has("go_goroutines") {
		t.Error("a failed JetStream read dropped the other metrics")
	}

	again, err := embedded.Start(embedded.Options{Listen: u.Host, DataDir: dataDir, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	current = again
	eventually(t, "the collector to read JetStream again", func() bool {
		f = promtest.Parse(t, promtest.Scrape(t, hs.URL))
		return f.Value("toolpool_jetstream_up") == 1
	})
	if got := f.LabelValues("toolpool_queue_pending_calls", "tool"); len(got) != 3 {
		t.Errorf("after the restart: tools %v, want the three consumers back", got)
	}
}
