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
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			m.inFlight.Dec()
			route := r.Pattern
			if route == "" {
				route = UnmatchedRoute
			}
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
			m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}()
		mux.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer
// (Flush, deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
