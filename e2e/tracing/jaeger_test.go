package tracing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
)

// jaeger is a Jaeger started by a test: in-memory storage, OTLP over HTTP
// and the query API on free loopback ports, nothing else listening.
type jaeger struct {
	proc     *proctest.Proc
	client   *http.Client
	otlpURL  string // OTEL_EXPORTER_OTLP_ENDPOINT for the pool's processes
	queryURL string // the query API (and UI)
}

// jaegerConfig is the collector configuration: only the OTLP/HTTP
// receiver, the in-memory store and the query extension, each on the
// address given (Jaeger's all-in-one default would listen on a dozen fixed
// ports, 4317/4318/16686 among them, which a test cannot assume free).
// The collector's own metrics are off (they would listen on :8888).
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// startJaeger starts Jaeger and waits until it takes spans and answers
// queries.
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	dir := t.TempDir()
	query, grpc, otlp := natstest.FreeAddr(t), natstest.FreeAddr(t), natstest.FreeAddr(t)
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, query, grpc, otlp), 0o644); err != nil {
		t.Fatal(err)
	}
	j := &jaeger{client: &http.Client{}, otlpURL: "http://" + otlp, queryURL: "http://" + query}
	t.Cleanup(j.client.CloseIdleConnections)
	j.proc = proctest.Command{Name: "jaeger", Path: jaegerBin, Args: []string{"--config", cfg},
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, Dir: dir, LogTail: 8000}.Start(t)
	j.proc.WaitListening(otlp, waitLong)
	j.proc.WaitHTTP(j.queryURL+"/api/services", waitLong)
	return j
}

// The query API's JSON (Jaeger's /api/traces), as much as the tests read.
type (
	jTrace struct {
		TraceID   string              `json:"traceID"`
		Spans     []jSpan             `json:"spans"`
		Processes map[string]jProcess `json:"processes"`
	}
	jSpan struct {
		TraceID       string `json:"traceID"`
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []jRef `json:"references"`
		StartTime     int64  `json:"startTime"` // µs since the epoch
		Duration      int64  `json:"duration"`  // µs
		Tags          []jKV  `json:"tags"`
		Logs          []jLog `json:"logs"`
		ProcessID     string `json:"processID"`
	}
	jRef struct {
		RefType string `json:"refType"` // CHILD_OF or FOLLOWS_FROM
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	}
	jKV struct {
		Key   string `json:"key"`
		Type  string `json:"type"`
		Value any    `json:"value"`
	}
	jLog struct {
		Timestamp int64 `json:"timestamp"`
		Fields    []jKV `json:"fields"`
	}
	jProcess struct {
		ServiceName string `json:"serviceName"`
		Tags        []jKV  `json:"tags"`
	}
)

// kv is the value of key in kvs as text ("" when absent).
func kv(kvs []jKV, key string) string {
	for _, f := range kvs {
		if f.Key == key {
			return fmt.Sprint(f.Value)
		}
	}
	return ""
}

// tag is the value of the span's attribute key as text ("" when absent).
func (s *jSpan) tag(key string) string { return kv(s.Tags, key) }

// parent is the span id of the span's parent in the same trace ("" for
// a root).
func (s *jSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
			return r.SpanID
		}
	}
	return ""
}

// event returns the span's first event named name.
func (s *jSpan) event(name string) (jLog, bool) {
	for _, l := range s.Logs {
		if kv(l.Fields, "event") == name {
			return l, true
		}
	}
	return jLog{}, false
}

// eventNames are the names of the span's events, in order.
func (s *jSpan) eventNames() []string {
	var names []string
	for _, l := range s.Logs {
		names = append(names, kv(l.Fields, "event"))
	}
	return names
}

// service is the name of the service that reported span.
func (tr *jTrace) service(s *jSpan) string { return tr.Processes[s.ProcessID].ServiceName }

// named returns the spans whose operation is name, in start order.
func (tr *jTrace) named(name string) []*jSpan {
	var out []*jSpan
	for i := range tr.Spans {
		if tr.Spans[i].OperationName == name {
			out = append(out, &tr.Spans[i])
		}
	}
	slices.SortFunc(out, func(a, b *jSpan) int { return int(a.StartTime - b.StartTime) })
	return out
}

// summary is one line per span, for a failed test's log.
func (tr *jTrace) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s, %d spans:\n", tr.TraceID, len(tr.Spans))
	for i := range tr.Spans {
		s := &tr.Spans[i]
		proc := tr.Processes[s.ProcessID]
		fmt.Fprintf(&b, "  %s %q (%s%v) parent %s, %dµs, tags", s.SpanID, s.OperationName, proc.ServiceName, proc.Tags, s.parent(), s.Duration)
		for _, f := range s.Tags {
			fmt.Fprintf(&b, " %s=%v", f.Key, f.Value)
		}
		fmt.Fprintf(&b, ", events %v\n", s.eventNames())
	}
	return b.String()
}

// traces asks the query API for the traces of the last hour with a span
// of service named operation. (The operation narrows the search: every
// request to the orchestrator is a trace of its own, the test's polls of
// GET /v1/tools included, and a search returns at most limit traces.)
func (j *jaeger) traces(ctx context.Context, service, operation string) ([]jTrace, error) {
	q := url.Values{"service": {service}, "operation": {operation}, "lookback": {"1h"}, "limit": {"20"}}
	var body struct {
		Data   []jTrace `json:"data"`
		Errors []any    `json:"errors"`
	}
	if err := j.get(ctx, "/api/traces?"+q.Encode(), &body); err != nil {
		return nil, err
	}
	if len(body.Errors) > 0 {
		return nil, fmt.Errorf("query API: %v", body.Errors)
	}
	return body.Data, nil
}

// get reads path of the query API as JSON into v.
func (j *jaeger) get(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.queryURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, proctest.Tail(string(data), 500))
	}
	return json.Unmarshal(data, v)
}
