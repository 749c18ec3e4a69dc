package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

// TimeoutDefault bounds all the checks of one readiness probe.
const TimeoutDefault = 2 * time.Second

// Check is one condition of readiness. Func returns nil when it holds and
// otherwise an error whose text says what is missing; the text is served
// to whoever probes, so it must hold no secret.
type Check struct {
	Name string
	Func func(ctx context.Context) error
	// Detail marks a check that is reported but does not make the report
	// fail: the status of a part the process serves without (an MCP server
	// of the catalog, retried in the background). It runs even after a
	// failed check.
	Detail bool
	// key, when set, says what the check is about now (ConsumersOf: the
	// tools served): a Background check's result stands only for the key
	// it was made with.
	key func() string
}

// AsDetails returns checks marked Detail.
func AsDetails(checks ...Check) []Check {
	out := make([]Check, len(checks))
	for i, c := range checks {
		c.Detail = true
		out[i] = c
	}
	return out
}

// Handler serves GET /healthz (the process is alive: 200 unless a liveness
// check fails, see WithLiveness) and GET /readyz (200 when every check
// holds, 503 otherwise). Both answer a JSON object: {"status": "ok" |
// "not ok" | "ready" | "not ready", "checks": {name: "ok" or what is
// wrong}}, and for /readyz "age_seconds": {name: seconds} for the
// Background checks it ran.
type Handler struct {
	checks  []Check
	live    []Check
	timeout time.Duration
}

// New returns a Handler running checks, in order, for each readiness
// probe, within timeout (TimeoutDefault when zero). A failed check stops
// the probe: the later ones are reported as "skipped", but for details
// (Check.Detail), which always run and never fail the probe.
func New(timeout time.Duration, checks ...Check) *Handler {
	if timeout <= 0 {
		timeout = TimeoutDefault
	}
	return &Handler{checks: checks, timeout: timeout}
}

// WithLiveness adds checks to /healthz, which then answers 503 when one
// fails. They must be cheap and local (no round trip), and fail only for a
// state the process cannot leave by itself: a supervisor restarts a process
// whose /healthz fails. NATSNotClosed is such a check; a NATS outage is not
// (the client reconnects), so NATSConnected belongs to readiness.
func (h *Handler) WithLiveness(checks ...Check) *Handler {
	h.live = append(h.live, checks...)
	return h
}

// Register adds GET /healthz and GET /readyz to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", h.Live)
	mux.HandleFunc("GET /readyz", h.Ready)
}

// Report is the outcome of a readiness probe.
type Report struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
	// Age is, for each Background check the probe ran, how old (in
	// seconds) the result it reported is.
	Age map[string]float64 `json:"age_seconds,omitempty"`
}

// Ready reports whether every check holds.
func (r Report) Ready() bool { return r.Status == StatusReady }

// The statuses of a Report.
const (
	StatusOK       = "ok"
	StatusNotOK    = "not ok"
	StatusReady    = "ready"
	StatusNotReady = "not ready"
	checkOK        = "ok"
	checkSkipped   = "skipped"
)

// Check runs the readiness checks and reports.
func (h *Handler) Check(ctx context.Context) Report {
	return run(ctx, h.timeout, h.checks, StatusReady, StatusNotReady)
}

// run runs checks in order within timeout; the report's status is good
// while they hold and bad from the first that fails.
func run(ctx context.Context, timeout time.Duration, checks []Check, good, bad string) Report {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rep := Report{Status: good, Checks: make(map[string]string, len(checks))}
	for _, c := range checks {
		if rep.Status != good && !c.Detail {
			rep.Checks[c.Name] = checkSkipped
			continue
		}
		if err := runOne(ctx, c, &rep); err != nil {
			if c.Detail {
				rep.Checks[c.Name] = err.Error()
				continue
			}
			rep.Status = bad
			rep.Checks[c.Name] = err.Error()
			continue
		}
		rep.Checks[c.Name] = checkOK
	}
	return rep
}

// runOne runs c, noting in rep the age of the result when c is a
// Background check.
func runOne(ctx context.Context, c Check, rep *Report) error {
	age := time.Duration(-1)
	err := c.Func(context.WithValue(ctx, ageKey{}, &age))
	if age >= 0 {
		if rep.Age == nil {
			rep.Age = make(map[string]float64)
		}
		rep.Age[c.Name] = age.Round(time.Millisecond).Seconds()
	}
	return err
}

// Live serves /healthz: 200 while the process can answer and its liveness
// checks hold, 503 otherwise.
func (h *Handler) Live(w http.ResponseWriter, r *http.Request) {
	if len(h.live) == 0 {
		writeJSON(w, http.StatusOK, Report{Status: StatusOK})
		return
	}
	rep := run(r.Context(), h.timeout, h.live, StatusOK, StatusNotOK)
	code := http.StatusOK
	if rep.Status != StatusOK {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, rep)
}

// Ready serves /readyz: 200 when every check holds, 503 otherwise.
func (h *Handler) Ready(w http.ResponseWriter, r *http.Request) {
	rep := h.Check(r.Context())
	code := http.StatusOK
	if !rep.Ready() {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, rep)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// NATSConnected holds while nc is connected to a server.
func NATSConnected(nc *nats.Conn) Check {
	return Check{Name: "nats", Func: func(context.Context) error {
		if nc.IsConnected() {
			return nil
		}
		return fmt.Errorf("not connected to NATS (%s)", nc.Status())
	}}
}

// NATSNotClosed holds until nc is closed for good (see jetstream.Closed):
// while it reconnects after an outage the process is still alive.
func NATSNotClosed(nc *nats.Conn) Check {
	return Check{Name: "nats", Func: func(context.Context) error {
		if !nc.IsClosed() {
			return nil
		}
		if err := nc.LastError(); err != nil {
			return fmt.Errorf("the NATS connection is closed for good (%s); the process must be restarted", cleanErr(err))
		}
		return errors.New("the NATS connection is closed for good; the process must be restarted")
	}}
}

// Streams holds while JetStream answers for each of the streams (default:
// TOOL_CALLS, TOOL_RESULTS and TOOL_DLQ).
func Streams(j js.JetStream, names ...string) Check {
	if len(names) == 0 {
		names = []string{jetstream.StreamCalls, jetstream.StreamResults, jetstream.StreamDLQ}
	}
	return Check{Name: "streams", Func: func(ctx context.Context) error {
		for _, name := range names {
			if _, err := j.Stream(ctx, name); err != nil {
				return fmt.Errorf("stream %s unavailable: %w", name, cleanErr(err))
			}
		}
		return nil
	}}
}

// StoreProbeSubject is where StoreWritable writes its probes: in
// TOOL_RESULTS, under a token no orchestrator instance can have ('$' is
// not allowed in one), so no result consumer ever sees them; they expire
// with the stream's max age (1 h).
const StoreProbeSubject = jetstream.ResultSubjectPrefix + "$readyz"

// StoreWritable holds while JetStream stores a message: each probe
// publishes a few bytes to StoreProbeSubject and waits for the PubAck,
// which the server sends only once the message is in the stream's store.
// It fails when the store cannot write (a filestore write error, the disk
// or JetStream's storage limit full, the stream without a leader), which
// a stream look-up alone does not notice: the server then refuses every
// call an agent posts.
func StoreWritable(j js.JetStream) Check {
	return Check{Name: "store", Func: func(ctx context.Context) error {
		if _, err := j.Publish(ctx, StoreProbeSubject, []byte("readyz probe")); err != nil {
			return fmt.Errorf("JetStream cannot store messages: %w", cleanErr(err))
		}
		return nil
	}}
}

// Consumers holds while the durable consumer tool_<tool> of each tool
// exists on TOOL_CALLS: the consumers a worker serving tools pulls from.
func Consumers(j js.JetStream, tools []string) Check {
	return ConsumersOf(j, func() []string { return tools })
}

// ConsumersOf is Consumers of the tools names returns at each probe: a
// process whose tools change while it runs (an MCP server's list_changed)
// checks the consumers of the tools it serves now.
func ConsumersOf(j js.JetStream, names func() []string) Check {
	return Check{Name: "consumers", Func: func(ctx context.Context) error {
		for _, tool := range names() {
			name := jetstream.ConsumerName(tool)
			if _, err := j.Consumer(ctx, jetstream.StreamCalls, name); err != nil {
				return fmt.Errorf("consumer %s unavailable: %w", name, cleanErr(err))
			}
		}
		return nil
	}, key: func() string { return strings.Join(names(), "\x00") }}
}

// Flag holds while set is true: a process sets it once it has started
// (e.g. its worker is pulling) and clears it when it begins to shut down.
func Flag(name string, set *atomic.Bool, notSet string) Check {
	return Check{Name: name, Func: func(context.Context) error {
		if set.Load() {
			return nil
		}
		return errors.New(notSet)
	}}
}

// cleanErr keeps the error texts a probe shows short and free of
// addresses: a timeout is a timeout.
func cleanErr(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return errNoAnswer
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, js.ErrJetStreamNotEnabled):
		return errors.New("JetStream is not available")
	}
	return err
}
