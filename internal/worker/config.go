package worker

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Defaults of Config.
const (
	// ConcurrencyDefault is how many calls one worker executes at once.
	ConcurrencyDefault = 256
	// DrainTimeoutDefault is how long Stop lets in-flight calls finish.
	DrainTimeoutDefault = 30 * time.Second
	// PublishTimeoutDefault bounds the wait for a result's or dead letter's
	// PubAck.
	PublishTimeoutDefault = 10 * time.Second
	// AbandonGraceDefault is how long a handler that ignores its context's
	// cancellation gets before the worker stops waiting for it.
	AbandonGraceDefault = 2 * time.Second
	// PublishRetryForDefault is how long a worker keeps retrying the
	// publish of a result or dead letter that failed transiently before it
	// hands the call back.
	PublishRetryForDefault = time.Minute
)

// WorkerIDMaxBytes is the longest Config.WorkerID accepted. The id goes into
// the keys of the worker's announcements, which are subjects: a long one
// would exceed the server's control-line limit and close the connection.
const WorkerIDMaxBytes = 128

// Config configures a Worker. Zero fields take the documented defaults
// (WithDefaults); New fills them and checks the rest.
type Config struct {
	// JetStream is the JetStream context the worker pulls from and publishes
	// to. Required.
	JetStream js.JetStream
	// Registry holds the tools this worker serves. Required; it may be
	// empty, and the worker then pulls nothing until Serve.
	Registry *tools.Registry
	// Tools limits the worker to these tools of the registry. Default: all.
	Tools []string
	// Concurrency caps the calls this worker executes at once, over all its
	// tools. Default ConcurrencyDefault.
	Concurrency int
	// WorkerID names this worker in results and dead letters, and in the
	// keys of its tools' announcements (a KV subject). At most
	// WorkerIDMaxBytes. Default "<hostname>-<pid>-<random>".
	WorkerID string
	// AckWait is the liveness window of the consumers this worker makes
	// or updates (jetstream.ConsumerSpec.AckWait): a call held by a worker
	// that died is delivered again this long after its last heartbeat. It
	// does not bound a call's run time; heartbeats keep a call alive while
	// it runs or queues. Give every worker of a tool the same value (each
	// brings the consumer to its own). Default jetstream.AckWaitDefault (20s).
	AckWait time.Duration
	// DrainTimeout is how long Run lets in-flight calls finish on shutdown
	// before it hands them back. Default DrainTimeoutDefault.
	DrainTimeout time.Duration
	// PublishTimeout bounds each wait for a PubAck. Default
	// PublishTimeoutDefault.
	PublishTimeout time.Duration
	// PublishRetryFor is how long a result or dead letter whose publish
	// failed transiently (no PubAck while a stream leader is elected, a
	// reconnect) is published again, in place, before the worker hands the
	// call back to JetStream. The call keeps its message meanwhile (in-progress
	// acks), so an outage shorter than this neither runs the call again nor
	// counts a delivery against its attempts. Default PublishRetryForDefault;
	// negative: hand back at the first failure.
	PublishRetryFor time.Duration
	// AbandonGrace is how long a timed-out handler may take to return before
	// the worker answers without it. Default AbandonGraceDefault.
	AbandonGrace time.Duration
	// Limits caps input and result sizes. Default envelope.DefaultLimits.
	Limits envelope.Limits
	// Logger receives the worker's logs. Default slog.Default().
	Logger *slog.Logger
	// Metrics observes every attempt. Default: none.
	Metrics Metrics
	// Rand is the jitter source. Default: math/rand/v2's global source.
	Rand classify.Rand
	// History records every failed attempt so dead letters carry them all
	// (a *settle.History). Default nil: a dead letter carries only its last
	// attempt.
	History History
	// HistoryTimeout bounds each read or write of History. Default
	// HistoryTimeoutDefault.
	HistoryTimeout time.Duration
	// Tracer records a span per delivery ("execute_tool <tool>", and
	// "queued <tool>" on the first), children of the call's traceparent.
	// Default nil: off, at no cost.
	Tracer *tracing.Tracer
}

// WithDefaults returns c with zero fields set to the documented defaults: a
// nil Logger is slog.Default(), nil Metrics observe nothing. New applies
// it.
func (c Config) WithDefaults() Config {
	c.Concurrency = cmp.Or(c.Concurrency, ConcurrencyDefault)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DrainTimeoutDefault)
	c.PublishTimeout = cmp.Or(c.PublishTimeout, PublishTimeoutDefault)
	c.AckWait = cmp.Or(c.AckWait, jetstream.AckWaitDefault)
	c.AbandonGrace = cmp.Or(c.AbandonGrace, AbandonGraceDefault)
	c.PublishRetryFor = cmp.Or(c.PublishRetryFor, PublishRetryForDefault)
	c.HistoryTimeout = cmp.Or(c.HistoryTimeout, HistoryTimeoutDefault)
	c.Limits.MaxInputBytes = cmp.Or(c.Limits.MaxInputBytes, envelope.MaxInputBytesDefault)
	c.Limits.MaxContentBytes = cmp.Or(c.Limits.MaxContentBytes, envelope.MaxContentBytesDefault)
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = cmp.Or(host, "worker") + "-" + strconv.Itoa(os.Getpid()) + "-" + nuid.Next()[16:]
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = nopMetrics{}
	}
	return c
}

// Validate names the first bad field of a config with its defaults
// (WithDefaults): New refuses such a config with its error.
func (c Config) Validate() error {
	switch {
	case c.JetStream == nil:
		return errors.New("worker: Config.JetStream is required")
	case c.Registry == nil:
		return errors.New("worker: Config.Registry is required")
	case c.Concurrency < 1:
		return fmt.Errorf("worker: Config.Concurrency must be at least 1, got %d", c.Concurrency)
	case c.DrainTimeout < 0:
		return fmt.Errorf("worker: Config.DrainTimeout must not be negative, got %s", c.DrainTimeout)
	case c.PublishTimeout < 0:
		return fmt.Errorf("worker: Config.PublishTimeout must not be negative, got %s", c.PublishTimeout)
	case c.AbandonGrace < 0:
		return fmt.Errorf("worker: Config.AbandonGrace must not be negative, got %s", c.AbandonGrace)
	case c.HistoryTimeout < 0:
		return fmt.Errorf("worker: Config.HistoryTimeout must not be negative, got %s", c.HistoryTimeout)
	case c.AckWait < jetstream.AckWaitMin:
		return fmt.Errorf("worker: Config.AckWait must be at least %s, got %s", jetstream.AckWaitMin, c.AckWait)
	case len(c.WorkerID) > WorkerIDMaxBytes:
		return fmt.Errorf("worker: Config.WorkerID is %d bytes; the limit is %d", len(c.WorkerID), WorkerIDMaxBytes)
	}
	for _, name := range c.Tools {
		if _, ok := c.Registry.Lookup(name); !ok {
			return fmt.Errorf("worker: Config.Tools names %q, which is not in the registry", name)
		}
	}
	return nil
}
