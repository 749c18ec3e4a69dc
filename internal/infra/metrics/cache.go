package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CacheOptions configures Cache metrics.
type CacheOptions struct {
	// MaxTools caps the distinct tool labels. Default MaxToolsDefault.
	MaxTools int
}

// The outcomes of toolpool_cache_total; any other is counted as
// cacheOutcomeOther.
var cacheOutcomes = []string{"hit", "miss", "coalesced", "bypass"}

const cacheOutcomeOther = "other"

// Cache is the Prometheus implementation of rescache.Metrics: what the
// result cache did per tool (hit, miss, coalesced, bypass), the results it
// stored, its failures and the latency of its look-ups. It is safe for
// concurrent use.
type Cache struct {
	tools *toolLabels

	outcomes    *prometheus.CounterVec
	stored      *prometheus.CounterVec
	storedBytes *prometheus.CounterVec
	errors      *prometheus.CounterVec
	lookup      *prometheus.HistogramVec

	totals [6]atomic.Uint64 // hit, miss, coalesced, bypass, stored, errors
}

// CacheTotals are a Cache's counts since the process started, summed over
// the tools: for an overview (the console).
type CacheTotals struct {
	Hits, Misses, Coalesced, Bypassed, Stored, Errors uint64
}

// LookupBuckets are the buckets, in seconds, of the cache's look-up
// histogram: a hit is expected well under a millisecond.
var LookupBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1}

// NewCache creates the result cache's metrics and registers them with
// reg.
func NewCache(reg prometheus.Registerer, opts CacheOptions) (*Cache, error) {
	const sub = "cache"
	m := &Cache{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "total",
			Help: "Calls of cacheable tools by what the result cache did: hit (answered from it, no worker), miss (run, then stored), coalesced (waited for an identical call in flight), bypass (the caller asked for a fresh run).",
		}, []string{"tool", "outcome"}),
		stored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "stored_total",
			Help: "Successful results this orchestrator stored in the result cache.",
		}, []string{"tool"}),
		storedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "stored_bytes_total",
			Help: "Bytes of the results this orchestrator stored in the result cache.",
		}, []string{"tool"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "errors_total",
			Help: "Result cache operations that failed (get, put): the call went on without the cache.",
		}, []string{"op"}),
		lookup: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: sub, Name: "lookup_seconds",
			Help:    "Time of a result cache look-up (one JetStream direct get), by whether it found a result.",
			Buckets: LookupBuckets,
		}, []string{"found"}),
	}
	for _, c := range []prometheus.Collector{m.outcomes, m.stored, m.storedBytes, m.errors, m.lookup} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, op := range []string{"get", "put"} {
		m.errors.WithLabelValues(op)
	}
	m.tools = newToolLabels(nil, nil, opts.MaxTools, m.initTool)
	return m, nil
}

// initTool makes a tool's counters exist at zero from its first event.
func (m *Cache) initTool(tool string) {
	for _, o := range cacheOutcomes {
		m.outcomes.WithLabelValues(tool, o)
	}
	m.stored.WithLabelValues(tool)
	m.storedBytes.WithLabelValues(tool)
}

// Outcome counts what the cache did for one call of tool.
func (m *Cache) Outcome(tool, outcome string) {
	i := 0
	for i < len(cacheOutcomes) && cacheOutcomes[i] != outcome {
		i++
	}
	if i == len(cacheOutcomes) {
		outcome = cacheOutcomeOther
	} else {
		m.totals[i].Add(1)
	}
	m.outcomes.WithLabelValues(m.tools.label(tool), outcome).Inc()
}

// Stored counts a result of tool stored, of size bytes.
func (m *Cache) Stored(tool string, size int) {
	tool = m.tools.label(tool)
	m.stored.WithLabelValues(tool).Inc()
	m.storedBytes.WithLabelValues(tool).Add(float64(max(size, 0)))
	m.totals[4].Add(1)
}

// Failed counts an operation that failed: op is "get" or "put".
func (m *Cache) Failed(op string) {
	if op != "get" && op != "put" {
		op = cacheOutcomeOther
	}
	m.errors.WithLabelValues(op).Inc()
	m.totals[5].Add(1)
}

// Lookup observes a look-up's duration.
func (m *Cache) Lookup(d time.Duration, found bool) {
	label := "false"
	if found {
		label = "true"
	}
	m.lookup.WithLabelValues(label).Observe(max(d, 0).Seconds())
}

// Totals returns the counts since the process started.
func (m *Cache) Totals() CacheTotals {
	return CacheTotals{
		Hits: m.totals[0].Load(), Misses: m.totals[1].Load(), Coalesced: m.totals[2].Load(),
		Bypassed: m.totals[3].Load(), Stored: m.totals[4].Load(), Errors: m.totals[5].Load(),
	}
}
