package metrics

import (
	"github.com/toolpool/toolpool/internal/pooltype"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// DispatchOptions configures Dispatch metrics.
type DispatchOptions struct {
	// Known, when set, says whether a tool name may be a label value; names
	// it refuses are labelled UnknownTool. The dispatcher reports only
	// names its catalog accepted, so it is rarely needed. Default: every
	// name, up to MaxTools.
	Known func(tool string) bool
	// MaxTools caps the distinct tool labels. Default MaxToolsDefault.
	MaxTools int
}

// Dispatch is the Prometheus implementation of dispatch.Metrics (and of
// dispatch.RejectMetrics) for an orchestrator. Its PoisonCall method fits
// dlq.PoisonConfig.OnPoison. It is safe for concurrent use.
type Dispatch struct {
	tools *toolLabels

	calls      *prometheus.CounterVec
	results    *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	pending    prometheus.Gauge
	late       *prometheus.CounterVec
	duplicates *prometheus.CounterVec
	expired    *prometheus.CounterVec
	rejected   *prometheus.CounterVec
	poison     *prometheus.CounterVec
	cancelled  *prometheus.CounterVec
}

// NewDispatch creates the orchestrator's dispatch metrics and registers
// them with reg.
func NewDispatch(reg prometheus.Registerer, opts DispatchOptions) (*Dispatch, error) {
	const sub = "dispatch"
	m := &Dispatch{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "calls_total",
			Help: "Calls the orchestrator stored in TOOL_CALLS.",
		}, []string{"tool"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "results_total",
			Help: "Results that reached a waiting caller, by error class (none on success).",
		}, []string{"tool", "class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: sub, Name: "duration_seconds",
			Help:    "End-to-end time from dispatching a call to its result reaching the caller, retries included.",
			Buckets: DurationBuckets,
		}, []string{"tool"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "pending_calls",
			Help: "Calls waiting for their result in this orchestrator.",
		}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "late_results_total",
			Help: "Results that arrived after their caller stopped waiting (deadline passed or caller gone).",
		}, []string{"tool"}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "duplicate_results_total",
			Help: "Second and later results of an already answered call, dropped.",
		}, []string{"tool"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "expired_total",
			Help: "Calls answered with is_error because their deadline passed with no result.",
		}, []string{"tool"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "rejected_total",
			Help: "Calls answered by the orchestrator without publishing them, by code (unknown_tool, no_worker, invalid_argument, ...). Unknown tool names are labelled _unknown.",
		}, []string{"tool", "code"}),
		cancelled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "cancelled_total",
			Help: "Calls cancelled pool-wide because their caller gave up (an HTTP client that disconnected, an MCP notifications/cancelled, a cancelled context) before their result came.",
		}, []string{"tool"}),
		poison: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "dlq", Name: "poison_calls_total",
			Help: "Calls that reached their consumer's MaxDeliver without any worker reporting, moved to TOOL_DLQ by this orchestrator's poison watcher.",
		}, []string{"tool"}),
	}
	for _, c := range []prometheus.Collector{
		m.calls, m.results, m.duration, m.pending, m.late, m.duplicates, m.expired, m.rejected, m.poison, m.cancelled,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.tools = newToolLabels(nil, opts.Known, opts.MaxTools, m.initTool)
	return m, nil
}

// initTool makes the rare-event counters of a tool exist at zero from its
// first call, so that increase() and rate() see their first event.
func (m *Dispatch) initTool(tool string) {
	for _, v := range []*prometheus.CounterVec{m.late, m.duplicates, m.expired, m.poison, m.cancelled} {
		v.WithLabelValues(tool)
	}
}

// CallDispatched counts a call stored in TOOL_CALLS.
func (m *Dispatch) CallDispatched(tool string) {
	m.calls.WithLabelValues(m.tools.label(tool)).Inc()
}

// ResultReceived counts a result that reached its caller and observes the
// end-to-end time.
func (m *Dispatch) ResultReceived(tool string, class envelope.Class, elapsed time.Duration) {
	tool = m.tools.label(tool)
	m.results.WithLabelValues(tool, classLabel(class)).Inc()
	m.duration.WithLabelValues(tool).Observe(max(elapsed, 0).Seconds())
}

// LateResult counts a result that came after its callers stopped waiting.
func (m *Dispatch) LateResult(tool string) { m.late.WithLabelValues(m.tools.label(tool)).Inc() }

// DuplicateResult counts a dropped second result.
func (m *Dispatch) DuplicateResult(tool string) {
	m.duplicates.WithLabelValues(m.tools.label(tool)).Inc()
}

// Expired counts a call answered at its deadline without a result.
func (m *Dispatch) Expired(tool string) { m.expired.WithLabelValues(m.tools.label(tool)).Inc() }

// CallCancelled counts a call cancelled pool-wide because its caller gave
// up.
func (m *Dispatch) CallCancelled(tool string) { m.cancelled.WithLabelValues(m.tools.label(tool)).Inc() }

// Pending adds delta to the calls waiting for a result.
func (m *Dispatch) Pending(delta int) { m.pending.Add(float64(delta)) }

// CallRejected counts a call answered without being published.
func (m *Dispatch) CallRejected(tool string, known bool, code string) {
	label := UnknownTool
	if known {
		label = m.tools.label(tool)
	}
	m.rejected.WithLabelValues(label, rejectCode(code)).Inc()
}

// PoisonCall counts a call the poison watcher set aside; it fits
// dlq.PoisonConfig.OnPoison.
func (m *Dispatch) PoisonCall(p pooltype.PoisonCall) {
	m.poison.WithLabelValues(m.tools.label(p.Tool)).Inc()
}

// rejectCode bounds the code label of rejections.
func rejectCode(code string) string {
	switch code {
	case classify.CodeUnknownTool, classify.CodeNoWorker, classify.CodeInvalidArgument, classify.CodeInternal:
		return code
	}
	return "other"
}
