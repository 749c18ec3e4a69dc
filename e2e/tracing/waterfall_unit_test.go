package tracing_test

import (
	"strings"
	"testing"
)

// The waterfall lists every span once, children under their parent in
// start order and spans whose parent is not in the trace as roots, and
// escapes what the spans say.
func TestWaterfallHTML(t *testing.T) {
	span := func(id, parent, name string, start, dur int64, tags ...jKV) jSpan {
		s := jSpan{TraceID: "t1", SpanID: id, OperationName: name, StartTime: start, Duration: dur, Tags: tags, ProcessID: "p1"}
		if parent != "" {
			s.References = []jRef{{RefType: "CHILD_OF", TraceID: "t1", SpanID: parent}}
		}
		return s
	}
	tr := &jTrace{TraceID: "t1", Processes: map[string]jProcess{"p1": {ServiceName: "svc"}}, Spans: []jSpan{
		span("c2", "r", "second child", 300, 100, jKV{Key: "error.type", Value: "transient.<script>"}, jKV{Key: "otel.status_code", Value: "ERROR"}),
		span("r", "", "root", 0, 1000),
		span("c1", "r", "first child", 100, 100),
		span("o", "missing", "orphan", 500, 10),
	}}
	tr.Spans[0].Logs = []jLog{{Timestamp: 350, Fields: []jKV{{Key: "event", Value: "retry"}, {Key: "toolpool.retry.delay_ms", Value: 300}}}}
	html := string(waterfallHTML(t, tr))
	last := -1
	for _, name := range []string{"<b>root</b>", "<b>first child</b>", "<b>second child</b>", "<b>orphan</b>"} {
		i := strings.Index(html, name)
		if i < 0 || strings.Count(html, name) != 1 {
			t.Fatalf("%s appears %d times, want once:\n%s", name, strings.Count(html, name), html)
		}
		if i < last {
			t.Errorf("%s is out of order", name)
		}
		last = i
	}
	if strings.Contains(html, "<script>") || !strings.Contains(html, "transient.&lt;script&gt;") {
		t.Errorf("a span's attribute is not escaped:\n%s", html)
	}
	if !strings.Contains(html, "retry toolpool.retry.delay_ms=300") || !strings.Contains(html, `class="bar err"`) {
		t.Errorf("the failed span's event or error mark is missing:\n%s", html)
	}
}
