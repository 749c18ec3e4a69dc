package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// Namespace prefixes every toolpool metric.
const Namespace = "toolpool"

// UnknownTool is the tool label of a name the process does not know: an
// unknown tool a model asked for, a name outside the tools a worker was
// told about, or any new name once MaxToolsDefault distinct names were
// seen. Label values stay bounded whatever callers send.
const UnknownTool = "_unknown"

// MaxToolsDefault caps the distinct tool label values of a metrics set
// when it is given no list of tools.
const MaxToolsDefault = 1000

// ClassNone is the class label of a success (envelope.ClassNone is empty).
const ClassNone = "none"

// DurationBuckets are the buckets, in seconds, of the duration histograms:
// execution, queue wait, end-to-end dispatch and HTTP requests. They span a
// millisecond to ten minutes, the longest demo sleep.
var DurationBuckets = []float64{
	.001, .0025, .005, .01, .025, .05, .1, .25, .5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 600,
}

// RetryDelayBuckets are the buckets, in seconds, of the retry delay
// histogram: from the shortest base delay worth having to the longest
// max delay.
var RetryDelayBuckets = []float64{.01, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 120, 300}

// NewRegistry returns a registry holding the Go runtime and process
// collectors. Each process (and each test) builds its own: nothing is
// registered in the global default registry.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves reg in the Prometheus exposition formats. A collector
// that fails does not fail the scrape: the other metrics are still served.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	})
}

// classLabel is the class label of c: "none" for a success, and an
// unexpected class counts as internal, as envelope does.
func classLabel(c envelope.Class) string {
	switch {
	case c == envelope.ClassNone:
		return ClassNone
	case c.Valid():
		return string(c)
	default:
		return string(envelope.ClassInternal)
	}
}

// toolLabels maps tool names to bounded label values: the names of a fixed
// list when it has one, else the first max distinct names; any other name
// becomes UnknownTool. onNew, when set, runs once for each label value
// (for a fixed list, when it is made), so that a tool's counters exist at
// zero from its first appearance: increase() then sees their first event.
//
// A fixed list grows with add (a worker serves a tool registered at
// runtime), by at most max names: the map is copied on each add, so label
// reads it without locking.
type toolLabels struct {
	fixed atomic.Pointer[map[string]struct{}] // never modified once stored; nil when no list was given
	known func(string) bool                   // optional filter for names not yet seen
	max   int
	onNew func(label string)

	mu    sync.RWMutex
	seen  map[string]struct{}
	added int // names add put in fixed; guarded by mu
}

func newToolLabels(list []string, known func(string) bool, max int, onNew func(string)) *toolLabels {
	l := &toolLabels{known: known, max: max, seen: map[string]struct{}{}, onNew: onNew}
	if l.max <= 0 {
		l.max = MaxToolsDefault
	}
	if list != nil {
		fixed := make(map[string]struct{}, len(list))
		for _, name := range list {
			fixed[name] = struct{}{}
			if onNew != nil {
				onNew(name)
			}
		}
		l.fixed.Store(&fixed)
	}
	return l
}

// add puts names in a fixed list, up to max names added in all; names
// beyond that stay UnknownTool. Without a fixed list it does nothing
// (every name gets its label as it comes, up to max).
func (l *toolLabels) add(names ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.fixed.Load()
	if old == nil {
		return
	}
	next := *old
	copied := false
	for _, name := range names {
		if _, ok := next[name]; ok || name == "" || len(name) > 64 || l.added >= l.max {
			continue
		}
		if !copied {
			next = make(map[string]struct{}, len(*old)+len(names))
			for k := range *old {
				next[k] = struct{}{}
			}
			copied = true
		}
		next[name] = struct{}{}
		l.added++
		if l.onNew != nil {
			l.onNew(name)
		}
	}
	if copied {
		l.fixed.Store(&next)
	}
}

// label returns the label value of tool.
func (l *toolLabels) label(tool string) string {
	if fixed := l.fixed.Load(); fixed != nil {
		if _, ok := (*fixed)[tool]; ok {
			return tool
		}
		return UnknownTool
	}
	l.mu.RLock()
	_, ok := l.seen[tool]
	l.mu.RUnlock()
	if ok {
		return tool
	}
	if tool == "" || len(tool) > 64 || (l.known != nil && !l.known(tool)) {
		return UnknownTool
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[tool]; ok {
		return tool
	}
	if len(l.seen) >= l.max {
		return UnknownTool
	}
	l.seen[tool] = struct{}{}
	if l.onNew != nil {
		l.onNew(tool)
	}
	return tool
}

// Registry is the Prometheus registry a process's metrics live in (see
// NewRegistry): an alias, so that packages which only pass one along need
// not import Prometheus.
type Registry = prometheus.Registry
