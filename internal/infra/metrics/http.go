package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// UnmatchedRoute is the route label of a request no pattern of the mux
// matched (a 404 or 405 of the mux itself).
const UnmatchedRoute = "_unmatched"

// HTTP counts the requests an http.ServeMux serves, labelled by the pattern
// that matched (never the raw path, so the label stays bounded) and the
// status code.
type HTTP struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

// NewHTTP creates the HTTP metrics and registers them with reg.
func NewHTTP(reg prometheus.Registerer) (*HTTP, error) {
	const sub = "http"
	m := &HTTP{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: sub, Name: "requests_total",
			Help: "HTTP requests served, by route (the mux pattern that matched, _unmatched for none) and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: sub, Name: "request_duration_seconds",
			Help:    "Time to serve HTTP requests, by route.",
			Buckets: DurationBuckets,
		}, []string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: sub, Name: "requests_in_flight",
			Help: "HTTP requests being served.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Wrap returns mux counted. mux is an *http.ServeMux, or a handler that
// passes the request on to one: the route label is the pattern the mux
// matched (http.Request.Pattern, which the mux sets), e.g. "GET /readyz"
// or "/v1/"; a request it matched to no pattern is labelled
// UnmatchedRoute.
func (m *HTTP) Wrap(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		sw := &StatusWriter{ResponseWriter: w}
		defer func() {
			m.inFlight.Dec()
			route := r.Pattern
			if route == "" {
				route = UnmatchedRoute
			}
			m.requests.WithLabelValues(route, strconv.Itoa(sw.Status())).Inc()
			m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}()
		mux.ServeHTTP(sw, r)
	})
}

// StatusWriter notes the status of the answer written through it, for a
// middleware that reports it (the request metrics here, the HTTP API's
// request span). Unwrap lets http.ResponseController reach the
// connection's writer (deadlines, flushes).
type StatusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader notes the status (the final one: not an informational 1xx)
// and writes it.
func (w *StatusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write writes the body; a body written without WriteHeader is a 200.
func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Status is the status written, 200 when the handler wrote nothing (as
// net/http answers then).
func (w *StatusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Unwrap is the writer it wraps.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
