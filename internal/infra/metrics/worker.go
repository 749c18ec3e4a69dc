package metrics

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolpool/toolpool/internal/pooltype"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolpool/toolpool/pkg/classify"
)

// WorkerOptions configures Worker metrics.
type WorkerOptions struct {
	// Tools are the tools the worker serves (its registry's names). Events
	// of any other name are labelled UnknownTool. Default: any name, up to
	// MaxTools. A tool's in-flight gauge and its counters without other
	// labels (panics, validation failures, dead letters by reason, …)
	// exist at zero from the start for the tools listed, and from its
	// first event for the others.
	Tools []string
	// MaxTools caps the distinct tool labels when Tools is nil. Default
	// MaxToolsDefault.
	MaxTools int
}

// Worker is the Prometheus implementation of worker.Metrics. One Worker may
// observe several workers of a process (their counts add up). It is safe
// for concurrent use.
type Worker struct {
	tools *toolLabels

	finished        *prometheus.CounterVec
	attempts        *prometheus.CounterVec
	handedBack      *prometheus.CounterVec
	execution       *prometheus.HistogramVec
	queueWait       *prometheus.HistogramVec
	inFlight        *prometheus.GaugeVec
	queued          *prometheus.GaugeVec
	retryDelay      *prometheus.HistogramVec
	validation      *prometheus.CounterVec
	deadLetters     *prometheus.CounterVec
	panics          *prometheus.CounterVec
	historyFailures *prometheus.CounterVec

	// The series of the events of every successful call, by tool label,
	// looked up once rather than by label values at every event.
	hot    seriesCache[*workerHot]
	flight seriesCache[prometheus.Gauge] // inFlight's
}

// workerHot is the series of one tool label that a successful first
// attempt's event touches: its execution and queue-wait histograms, and
// its attempts and finished calls without an error class.
type workerHot struct {
	execution  prometheus.Observer
	queueWait  prometheus.Observer
	attemptsOK prometheus.Counter // attempts_total{class="none"}
	success    prometheus.Counter // calls_finished_total{outcome="success",class="none"}
}

// hotOf returns the hot series of the tool label tool.
func (m *Worker) hotOf(tool string) *workerHot {
	return m.hot.get(tool, func() *workerHot {
		return &workerHot{
			execution:  m.execution.WithLabelValues(tool),
			queueWait:  m.queueWait.WithLabelValues(tool),
			attemptsOK: m.attempts.WithLabelValues(tool, ClassNone),
			success:    m.finished.WithLabelValues(tool, string(classify.FateSuccess), ClassNone),
		}
	})
}

// seriesCache holds series (or sets of them) by label: a map read without
// a lock, copied when a label is added.
type seriesCache[T any] struct {
	m  atomic.Pointer[map[string]T] // never modified once stored
	mu sync.Mutex                   // serialises the copies
}

// get returns the series of label, made by mk at its first use.
func (c *seriesCache[T]) get(label string, mk func() T) T {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[label]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[label]; ok {
			return v
		}
	}
	v := mk()
	next := map[string]T{label: v}
	if old != nil {
		for k, x := range *old {
			next[k] = x
		}
	}
	c.m.Store(&next)
	return v
}

// NewWorker creates the worker metrics and registers them with reg.
func NewWorker(reg prometheus.Registerer, opts WorkerOptions) (*Worker, error) {
	const sub = "worker"
	m := &Worker{
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "calls_finished_total",
			Help: "Calls a worker finished, by outcome (success, error: is_error without retry, dead_letter: moved to TOOL_DLQ, stored: answered from the result already stored, outcome_unknown: not run again after an attempt of a tool that is not idempotent started and never reported, cancelled: its caller cancelled it, before it ran or while it ran) and error class (none on success).",
		}, []string{"tool", "outcome", "class"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "attempts_total",
			Help: "Deliveries of calls a worker handled to the end (executed, or refused before executing), by the class of their outcome (none on success). Hand-backs on shutdown are not counted.",
		}, []string{"tool", "class"}),
		handedBack: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "handed_back_total",
			Help: "Calls a stopping worker handed back to JetStream for another worker to run.",
		}, []string{"tool"}),
		execution: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: sub, Name: "execution_seconds",
			Help:    "Run time of tool handlers, per attempt executed.",
			Buckets: DurationBuckets,
		}, []string{"tool"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: sub, Name: "queue_wait_seconds",
			Help:    "Time from the publish of a call to the start of its first delivery's handling.",
			Buckets: DurationBuckets,
		}, []string{"tool"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "calls_in_flight",
			Help: "Calls whose handler is running in this process.",
		}, []string{"tool"}),
		queued: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "calls_queued",
			Help: "Calls this process pulled that wait for a free slot because every slot is busy.",
		}, []string{"tool"}),
		retryDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: sub, Name: "retry_delay_seconds",
			Help:    "Delays chosen before retrying a call after a transient error (its count is the number of retries).",
			Buckets: RetryDelayBuckets,
		}, []string{"tool"}),
		validation: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "validation_failures_total",
			Help: "Calls refused by a worker because their input or message was invalid (never retried).",
		}, []string{"tool"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "dead_letters_total",
			Help: "Calls a worker moved to TOOL_DLQ, by reason (" + strings.Join(workerReasons(), ", ") + ").",
		}, []string{"tool", "reason"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "panics_total",
			Help: "Tool handler panics a worker recovered from.",
		}, []string{"tool"}),
		historyFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "history_failures_total",
			Help: "Failed reads or writes of a call's attempt history (its dead letter may miss attempts).",
		}, []string{"tool"}),
	}
	for _, c := range []prometheus.Collector{
		m.finished, m.attempts, m.handedBack, m.execution, m.queueWait, m.inFlight, m.queued,
		m.retryDelay, m.validation, m.deadLetters, m.panics, m.historyFailures,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.tools = newToolLabels(opts.Tools, nil, opts.MaxTools, m.initTool)
	return m, nil
}

// AddTools gives the tools names labels of their own when WorkerOptions
// listed the tools: a worker serves them from now on (registered at
// runtime: an MCP server's list changed). At most MaxTools names are added
// over the Worker's life; events of the others stay UnknownTool. Without a
// list it does nothing: every name gets its label, up to MaxTools.
func (m *Worker) AddTools(names ...string) { m.tools.add(names...) }

// initTool makes a tool's series without other labels, and its dead
// letters by the reasons a worker gives, exist at zero.
func (m *Worker) initTool(tool string) {
	for _, v := range []*prometheus.CounterVec{m.handedBack, m.validation, m.panics, m.historyFailures} {
		v.WithLabelValues(tool)
	}
	m.inFlight.WithLabelValues(tool)
	m.queued.WithLabelValues(tool)
	for _, r := range workerReasons() {
		m.deadLetters.WithLabelValues(tool, r)
	}
}

// Observe records one delivery's fate.
func (m *Worker) Observe(ev pooltype.WorkerEvent) {
	tool := m.tools.label(ev.Tool)
	if ev.HistoryFailed {
		m.historyFailures.WithLabelValues(tool).Inc()
	}
	if ev.Outcome == classify.FateHandedBack {
		m.handedBack.WithLabelValues(tool).Inc()
		return
	}
	class := classLabel(ev.Class)
	if ev.Outcome == classify.FateStored { // not an attempt: the tool did not run
		m.finished.WithLabelValues(tool, string(ev.Outcome), class).Inc()
		return
	}
	if ev.Outcome == classify.FateCancelled {
		m.finished.WithLabelValues(tool, string(ev.Outcome), class).Inc()
		if !ev.Executed { // settled without running: not an attempt
			return
		}
	}
	if ev.Outcome == classify.FateSuccess && class == ClassNone && ev.Executed && ev.Attempt == 1 && !ev.Panicked {
		m.observeSuccess(m.hotOf(tool), ev)
		return
	}
	m.attempts.WithLabelValues(tool, class).Inc()
	switch ev.Outcome {
	case classify.FateSuccess, classify.FateError, classify.FateDeadLetter, classify.FateOutcomeUnknown:
		m.finished.WithLabelValues(tool, string(ev.Outcome), class).Inc()
	case classify.FateRetry:
		m.retryDelay.WithLabelValues(tool).Observe(ev.RetryDelay.Seconds())
	}
	if ev.Outcome == classify.FateDeadLetter || ev.Outcome == classify.FateOutcomeUnknown {
		m.deadLetters.WithLabelValues(tool, reasonLabel(ev.DLQReason)).Inc()
	}
	if class == "validation" {
		m.validation.WithLabelValues(tool).Inc()
	}
	if ev.Executed {
		m.execution.WithLabelValues(tool).Observe(ev.ExecTime.Seconds())
	}
	if ev.Attempt == 1 {
		m.queueWait.WithLabelValues(tool).Observe(max(ev.QueueWait, 0).Seconds())
	}
	if ev.Panicked {
		m.panics.WithLabelValues(tool).Inc()
	}
}

// observeSuccess is Observe for the first attempt of a call that ran and
// succeeded, on the tool's hot series: what Observe's general path
// records for it.
func (m *Worker) observeSuccess(h *workerHot, ev pooltype.WorkerEvent) {
	h.attemptsOK.Inc()
	h.success.Inc()
	h.execution.Observe(ev.ExecTime.Seconds())
	h.queueWait.Observe(max(ev.QueueWait, 0).Seconds())
}

// Queued adds delta to the calls of tool waiting for a slot.
func (m *Worker) Queued(tool string, delta int) {
	m.queued.WithLabelValues(m.tools.label(tool)).Add(float64(delta))
}

// InFlight adds delta to the calls of tool running.
func (m *Worker) InFlight(tool string, delta int) {
	label := m.tools.label(tool)
	m.flight.get(label, func() prometheus.Gauge { return m.inFlight.WithLabelValues(label) }).Add(float64(delta))
}

// reasonLabel bounds the reason label to the known reasons.
func reasonLabel(r classify.Fate) string {
	if r.IsDeadLetterReason() {
		return string(r)
	}
	return "other"
}

// workerReasons are the dead-letter reasons a worker gives: all but poison,
// which the poison watcher gives.
func workerReasons() []string {
	var out []string
	for _, r := range classify.DeadLetterReasons() {
		if r != classify.FatePoison {
			out = append(out, string(r))
		}
	}
	return out
}
