package metrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/promtest"
	"github.com/toolpool/toolpool/internal/worker"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// gather scrapes reg through Handler, as Prometheus would.
func gather(t *testing.T, reg *prometheus.Registry) (promtest.Families, []byte) {
	t.Helper()
	hs := httptest.NewServer(Handler(reg))
	defer hs.Close()
	text := promtest.Scrape(t, hs.URL)
	return promtest.Parse(t, text), text
}

func TestToolLabels(t *testing.T) {
	t.Parallel()
	t.Run("fixed list", func(t *testing.T) {
		l := newToolLabels([]string{"echo", "sleep"}, nil, 0, nil)
		for in, want := range map[string]string{"echo": "echo", "sleep": "sleep", "flaky": UnknownTool, "": UnknownTool} {
			if got := l.label(in); got != want {
				t.Errorf("label(%q) = %q, want %q", in, got, want)
			}
		}
	})
	t.Run("fixed list grows", func(t *testing.T) {
		var made []string
		l := newToolLabels([]string{"echo"}, nil, 2, func(s string) { made = append(made, s) })
		l.add("late", "echo", "")
		l.add("later", "latest") // "latest" is past the cap of 2 added names
		for in, want := range map[string]string{"echo": "echo", "late": "late", "later": "later", "latest": UnknownTool} {
			if got := l.label(in); got != want {
				t.Errorf("label(%q) = %q, want %q", in, got, want)
			}
		}
		if want := []string{"echo", "late", "later"}; !slices.Equal(made, want) {
			t.Errorf("onNew ran for %v, want %v", made, want)
		}
	})
	t.Run("cap", func(t *testing.T) {
		l := newToolLabels(nil, nil, 3, nil)
		for i := range 3 {
			name := fmt.Sprintf("t%d", i)
			if got := l.label(name); got != name {
				t.Errorf("label(%q) = %q within the cap", name, got)
			}
		}
		if got := l.label("t3"); got != UnknownTool {
			t.Errorf("a fourth name is labelled %q, want %q", got, UnknownTool)
		}
		if got := l.label("t1"); got != "t1" {
			t.Errorf("a name seen before the cap is labelled %q", got)
		}
		if got := l.label(strings.Repeat("x", 65)); got != UnknownTool {
			t.Errorf("an overlong name is labelled %q", got)
		}
	})
	t.Run("known", func(t *testing.T) {
		l := newToolLabels(nil, func(s string) bool { return s == "echo" }, 0, nil)
		if got := l.label("echo"); got != "echo" {
			t.Errorf("label(echo) = %q", got)
		}
		if got := l.label("nope"); got != UnknownTool {
			t.Errorf("label(nope) = %q", got)
		}
	})
}

func TestClassLabel(t *testing.T) {
	t.Parallel()
	for in, want := range map[envelope.Class]string{
		envelope.ClassNone: "none", envelope.ClassTransient: "transient", envelope.ClassValidation: "validation",
		envelope.ClassPermanent: "permanent", envelope.ClassInternal: "internal", "weird": "internal",
	} {
		if got := classLabel(in); got != want {
			t.Errorf("classLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWorkerObserve feeds events straight to the worker metrics and checks
// every series they touch.
func TestWorkerObserve(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	m, err := NewWorker(reg, WorkerOptions{Tools: []string{"echo", "flaky"}})
	if err != nil {
		t.Fatal(err)
	}
	m.InFlight("echo", 1)
	m.InFlight("echo", 1)
	m.InFlight("echo", -1)
	m.Queued("flaky", 1)
	m.Queued("flaky", 1)
	m.Queued("flaky", -1)
	for _, ev := range []worker.Event{
		{Tool: "echo", Outcome: classify.FateSuccess, Attempt: 1, Executed: true, ExecTime: 20 * time.Millisecond, QueueWait: 5 * time.Millisecond},
		{Tool: "flaky", Outcome: classify.FateRetry, Class: envelope.ClassTransient, Attempt: 1, Executed: true, RetryDelay: 1500 * time.Millisecond, QueueWait: -time.Second},
		{Tool: "flaky", Outcome: classify.FateDeadLetter, Class: envelope.ClassTransient, Attempt: 2, Executed: true, DLQReason: classify.FateExhausted, HistoryFailed: true, QueueWait: time.Minute},
		{Tool: "flaky", Outcome: classify.FateError, Class: envelope.ClassInternal, Code: classify.CodePanic, Attempt: 1, Executed: true, Panicked: true},
		{Tool: "flaky", Outcome: classify.FateError, Class: envelope.ClassValidation, Attempt: 1},
		{Tool: "flaky", Outcome: classify.FateHandedBack, Attempt: 1, Executed: true},
		{Tool: "other", Outcome: classify.FateSuccess, Attempt: 1},
	} {
		m.Observe(ev)
	}
	f, _ := gather(t, reg)
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"toolpool_worker_calls_in_flight", []string{"tool", "echo"}, 1},
		{"toolpool_worker_calls_in_flight", []string{"tool", "flaky"}, 0},
		{"toolpool_worker_calls_queued", []string{"tool", "flaky"}, 1},
		{"toolpool_worker_calls_queued", []string{"tool", "echo"}, 0},
		{"toolpool_worker_calls_finished_total", nil, 5},
		{"toolpool_worker_calls_finished_total", []string{"tool", "echo", "outcome", "success", "class", "none"}, 1},
		{"toolpool_worker_calls_finished_total", []string{"tool", "flaky", "outcome", "dead_letter", "class", "transient"}, 1},
		{"toolpool_worker_calls_finished_total", []string{"tool", "flaky", "outcome", "error", "class", "internal"}, 1},
		{"toolpool_worker_calls_finished_total", []string{"tool", "flaky", "outcome", "error", "class", "validation"}, 1},
		{"toolpool_worker_calls_finished_total", []string{"tool", UnknownTool, "outcome", "success"}, 1},
		{"toolpool_worker_attempts_total", nil, 6},
		{"toolpool_worker_attempts_total", []string{"tool", "flaky", "class", "transient"}, 2},
		{"toolpool_worker_retry_delay_seconds_count", []string{"tool", "flaky"}, 1},
		{"toolpool_worker_retry_delay_seconds_sum", []string{"tool", "flaky"}, 1.5},
		{"toolpool_worker_execution_seconds_count", nil, 4},
		{"toolpool_worker_execution_seconds_count", []string{"tool", "echo"}, 1},
		{"toolpool_worker_execution_seconds_sum", []string{"tool", "echo"}, 0.02},
		{"toolpool_worker_queue_wait_seconds_count", nil, 5},                     // first deliveries, hand-backs excluded
		{"toolpool_worker_queue_wait_seconds_sum", []string{"tool", "flaky"}, 0}, // a negative wait (clock skew) counts as 0
		{"toolpool_worker_dead_letters_total", []string{"tool", "flaky", "reason", "exhausted"}, 1},
		{"toolpool_worker_validation_failures_total", []string{"tool", "flaky"}, 1},
		{"toolpool_worker_panics_total", []string{"tool", "flaky"}, 1},
		{"toolpool_worker_history_failures_total", []string{"tool", "flaky"}, 1},
		{"toolpool_worker_handed_back_total", []string{"tool", "flaky"}, 1},
	}
	for _, c := range checks {
		if got := f.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The listed tools' rare-event series exist at zero before any event,
	// so increase() sees the first one; an unlisted name gets none.
	for _, name := range []string{"toolpool_worker_panics_total", "toolpool_worker_handed_back_total", "toolpool_worker_calls_in_flight", "toolpool_worker_calls_queued"} {
		if got := f.LabelValues(name, "tool"); fmt.Sprint(got) != "[echo flaky]" {
			t.Errorf("%s tools = %v, want [echo flaky]", name, got)
		}
	}
	if got := f.LabelValues("toolpool_worker_dead_letters_total", "reason"); fmt.Sprint(got) != "[exhausted expired malformed outcome_unknown]" {
		t.Errorf("dead letter reasons = %v", got)
	}
}

func TestDispatchMetrics(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	m, err := NewDispatch(reg, DispatchOptions{MaxTools: 2})
	if err != nil {
		t.Fatal(err)
	}
	m.CallDispatched("echo")
	m.CallDispatched("sleep")
	m.CallDispatched("third") // past the cap
	m.Pending(3)
	m.ResultReceived("echo", envelope.ClassNone, 250*time.Millisecond)
	m.ResultReceived("sleep", envelope.ClassTransient, time.Second)
	m.Pending(-2)
	m.LateResult("echo")
	m.DuplicateResult("echo")
	m.Expired("sleep")
	m.CallRejected("made_up_tool", false, classify.CodeUnknownTool)
	m.CallRejected("echo", true, dispatch.CodeNoWorker)
	m.CallRejected("echo", true, "something_new")
	m.PoisonCall(dlq.PoisonCall{Tool: "sleep", Deliveries: 5})
	f, _ := gather(t, reg)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"toolpool_dispatch_calls_total", []string{"tool", "echo"}, 1},
		{"toolpool_dispatch_calls_total", []string{"tool", UnknownTool}, 1},
		{"toolpool_dispatch_pending_calls", nil, 1},
		{"toolpool_dispatch_results_total", []string{"tool", "echo", "class", "none"}, 1},
		{"toolpool_dispatch_results_total", []string{"tool", "sleep", "class", "transient"}, 1},
		{"toolpool_dispatch_duration_seconds_count", nil, 2},
		{"toolpool_dispatch_duration_seconds_sum", []string{"tool", "echo"}, 0.25},
		{"toolpool_dispatch_late_results_total", []string{"tool", "echo"}, 1},
		{"toolpool_dispatch_duplicate_results_total", []string{"tool", "echo"}, 1},
		{"toolpool_dispatch_expired_total", []string{"tool", "sleep"}, 1},
		{"toolpool_dispatch_rejected_total", []string{"tool", UnknownTool, "code", "unknown_tool"}, 1},
		{"toolpool_dispatch_rejected_total", []string{"tool", "echo", "code", "no_worker"}, 1},
		{"toolpool_dispatch_rejected_total", []string{"tool", "echo", "code", "other"}, 1},
		{"toolpool_dlq_poison_calls_total", []string{"tool", "sleep"}, 1},
	} {
		if got := f.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, name := range []string{"toolpool_dispatch_late_results_total", "toolpool_dispatch_expired_total", "toolpool_dlq_poison_calls_total"} {
		if got := f.LabelValues(name, "tool"); fmt.Sprint(got) != "[echo sleep]" {
			t.Errorf("%s tools = %v, want a zero series for every tool seen", name, got)
		}
	}
	if got := f.LabelValues("toolpool_dispatch_rejected_total", "tool"); strings.Contains(strings.Join(got, ","), "made_up_tool") {
		t.Errorf("an unknown tool name became a label value: %v", got)
	}
}

// TestHTTPRoutes: requests are labelled by the pattern that matched, never
// the path.
func TestHTTPRoutes(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	hm, err := NewHTTP(reg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusNotFound) })
	mux.HandleFunc("GET /flush", func(w http.ResponseWriter, _ *http.Request) {
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush through the middleware: %v", err)
		}
	})
	hs := httptest.NewServer(hm.Wrap(mux))
	defer hs.Close()
	for _, r := range []struct{ method, path string }{
		{"GET", "/items/1"}, {"GET", "/items/2"}, {"GET", "/v1/whatever?x=1"}, {"GET", "/nothing/here"},
		{"POST", "/items/3"}, {"GET", "/flush"},
	} {
		req, _ := http.NewRequest(r.method, hs.URL+r.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		// The body ends after the handler returned (and was counted), even
		// when the handler flushed the headers early.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	f, _ := gather(t, reg)
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"route", "GET /items/{id}", "code", "200"}, 2},
		{[]string{"route", "/v1/", "code", "404"}, 1},
		{[]string{"route", UnmatchedRoute, "code", "404"}, 1},
		{[]string{"route", UnmatchedRoute, "code", "405"}, 1},
		{[]string{"route", "GET /flush", "code", "200"}, 1},
	} {
		if got := f.Value("toolpool_http_requests_total", c.labels...); got != c.want {
			t.Errorf("toolpool_http_requests_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if got := f.Value("toolpool_http_request_duration_seconds_count"); got != 6 {
		t.Errorf("request durations observed: %v, want 6", got)
	}
	for _, route := range f.LabelValues("toolpool_http_requests_total", "route") {
		if strings.Contains(route, "/items/1") || strings.Contains(route, "whatever") {
			t.Errorf("a raw path became a route label: %q", route)
		}
	}
}

// TestRegistriesIndependent: each registry takes its own metric set; a
// second set on the same registry is refused with an error, not a panic.
func TestRegistriesIndependent(t *testing.T) {
	t.Parallel()
	for range 2 {
		reg := NewRegistry()
		if _, err := NewWorker(reg, WorkerOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := NewDispatch(reg, DispatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := NewHTTP(reg); err != nil {
			t.Fatal(err)
		}
		if _, err := NewWorker(reg, WorkerOptions{}); err == nil {
			t.Error("a second worker metric set on one registry was accepted")
		}
	}
}
