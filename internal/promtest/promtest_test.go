package promtest

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want []string
	}{
		{`sum by (tool) (rate(toolpool_worker_attempts_total{tool=~"$tool", class!="none"}[$__rate_interval]))`,
			[]string{"toolpool_worker_attempts_total"}},
		{`histogram_quantile(0.99, sum by (tool, le) (rate(toolpool_worker_execution_seconds_bucket[5m])))`,
			[]string{"toolpool_worker_execution_seconds_bucket"}},
		{`sum(rate(a_total[5m])) by (tool) / ignoring(class) group_left sum(rate(b_total[1h] offset 1d)) > 1e3`,
			[]string{"a_total", "b_total"}},
		{`max without (instance) (toolpool_tool_paused) == 1 and on (tool) toolpool_dlq_messages > bool 0`,
			[]string{"toolpool_dlq_messages", "toolpool_tool_paused"}},
		{`label_replace(up, "x", "$1", "job", "(.*)")`, []string{"up"}},
		{`count(x) or vector(0)`, []string{"x"}},
	}
	for _, tt := range tests {
		if got := MetricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("MetricNames(%s)\n got %v\nwant %v", tt.expr, got, tt.want)
		}
	}
}

func TestValue(t *testing.T) {
	t.Parallel()
	text := []byte(`# HELP c_total A counter.
# TYPE c_total counter
c_total{tool="a",class="none"} 2
c_total{tool="a",class="transient"} 3
c_total{tool="b",class="none"} 5
# HELP h_seconds A histogram.
# TYPE h_seconds histogram
h_seconds_bucket{tool="a",le="1"} 1
h_seconds_bucket{tool="a",le="+Inf"} 4
h_seconds_sum{tool="a"} 7.5
h_seconds_count{tool="a"} 4
`)
	f := Parse(t, text)
	for _, tt := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"c_total", nil, 10},
		{"c_total", []string{"tool", "a"}, 5},
		{"c_total", []string{"tool", "a", "class", "none"}, 2},
		{"c_total", []string{"tool", "c"}, 0},
		{"h_seconds_count", []string{"tool", "a"}, 4},
		{"h_seconds_sum", nil, 7.5},
		{"missing", nil, 0},
	} {
		if got := f.Value(tt.name, tt.labels...); got != tt.want {
			t.Errorf("Value(%s, %v) = %v, want %v", tt.name, tt.labels, got, tt.want)
		}
	}
	for name, want := range map[string]bool{"c_total": true, "h_seconds_bucket": true, "h_seconds": true, "c_total_count": false, "x": false} {
		if got := f.Has(name); got != want {
			t.Errorf("Has(%s) = %v, want %v", name, got, want)
		}
	}
	if got := f.LabelValues("c_total", "tool"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("LabelValues = %v", got)
	}
}

func TestGather(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "A counter."}, []string{"tool"})
	reg.MustRegister(c)
	c.WithLabelValues("a").Add(2)
	c.WithLabelValues("b").Inc()
	f := Gather(t, reg)
	if got := f.Value("c_total", "tool", "a"); got != 2 {
		t.Errorf("c_total{tool=a} = %v, want 2", got)
	}
	if got := f.Value("c_total"); got != 3 {
		t.Errorf("c_total = %v, want 3", got)
	}
}
