package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

// JetStreamTimeoutDefault bounds the JetStream requests of one scrape.
const JetStreamTimeoutDefault = 3 * time.Second

// JetStreamOptions configures a JetStreamCollector.
type JetStreamOptions struct {
	// Timeout bounds the JetStream requests of one scrape. Default
	// JetStreamTimeoutDefault.
	Timeout time.Duration
	// Logger receives the errors of failed scrapes, at debug level (the
	// failure shows as toolpool_jetstream_up 0). Default slog.Default().
	Logger *slog.Logger
	// DeadLetters counts the dead letters per tool in TOOL_DLQ (the fleet
	// side's dlq.Counts). Nil: the collector exports no dead-letter
	// counts.
	DeadLetters func(ctx context.Context, stream js.Stream) (map[string]uint64, error)
}

// JetStreamCollector reads the state of the pool from JetStream at scrape
// time: per tool, the calls pending, awaiting an ack and redelivered on
// its consumer tool_<tool>, whether the consumer is paused, the pull
// requests waiting on it, and its dead letters in TOOL_DLQ; and the size
// of each stream. When JetStream does not answer in time it reports
// toolpool_jetstream_up 0 and nothing else. One process per fleet (the
// orchestrator) should register it: every scrape costs a few JetStream
// requests.
type JetStreamCollector struct {
	js   js.JetStream
	opts JetStreamOptions

	up, pending, ackPending, redelivered, waiting, paused, dlqDepth, streamMsgs, streamBytes *prometheus.Desc
}

var _ prometheus.Collector = (*JetStreamCollector)(nil)

// NewJetStreamCollector returns a collector reading j. Register it with a
// prometheus.Registry.
func NewJetStreamCollector(j js.JetStream, opts JetStreamOptions) *JetStreamCollector {
	if opts.Timeout <= 0 {
		opts.Timeout = JetStreamTimeoutDefault
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
	}
	return &JetStreamCollector{
		js:   j,
		opts: opts,
		up: desc("jetstream_up",
			"1 when the last scrape read the pool's state from JetStream, 0 when JetStream did not answer."),
		pending: desc("queue_pending_calls",
			"Calls in TOOL_CALLS not yet delivered to any worker (consumer num_pending).", "tool"),
		ackPending: desc("queue_ack_pending_calls",
			"Calls delivered and not yet acknowledged: running, or waiting for a retry (consumer num_ack_pending).", "tool"),
		redelivered: desc("queue_redelivered_calls",
			"Calls awaiting an ack that were delivered more than once (consumer num_redelivered).", "tool"),
		waiting: desc("queue_pull_requests",
			"Pull requests waiting on the tool's consumer; 0 means no worker is asking for its calls (consumer num_waiting).", "tool"),
		paused: desc("tool_paused",
			"1 while the tool's consumer is paused (after a rate limit, or by an operator): no worker gets its calls.", "tool"),
		dlqDepth: desc("dlq_messages",
			"Dead letters of the tool waiting in TOOL_DLQ.", "tool"),
		streamMsgs: desc("stream_messages",
			"Messages stored in a toolpool stream.", "stream"),
		streamBytes: desc("stream_bytes",
			"Bytes stored in a toolpool stream.", "stream"),
	}
}

// Describe sends the descriptors of the metrics.
func (c *JetStreamCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.up, c.pending, c.ackPending, c.redelivered, c.waiting, c.paused, c.dlqDepth, c.streamMsgs, c.streamBytes,
	} {
		ch <- d
	}
}

// Collect reads JetStream and sends the metrics.
func (c *JetStreamCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	ms, err := c.read(ctx)
	if err != nil {
		c.opts.Logger.Debug("metrics: reading JetStream failed", slog.Any("error", err))
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, m := range ms {
		ch <- m
	}
}

// read gathers every metric but up; any failure fails the whole read, so a
// scrape never shows half the pool.
func (c *JetStreamCollector) read(ctx context.Context) ([]prometheus.Metric, error) {
	var out []prometheus.Metric
	gauge := func(d *prometheus.Desc, v float64, label string) {
		out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, label))
	}
	streams := map[string]js.Stream{}
	for _, name := range []string{jetstream.StreamCalls, jetstream.StreamResults, jetstream.StreamDLQ} {
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		streams[name] = s
		st := s.CachedInfo().State
		gauge(c.streamMsgs, float64(st.Msgs), name)
		gauge(c.streamBytes, float64(st.Bytes), name)
	}

	lister := streams[jetstream.StreamCalls].ListConsumers(ctx)
	for info := range lister.Info() {
		tool, ok := strings.CutPrefix(info.Name, jetstream.ConsumerPrefix)
		if !ok || tool == "" {
			continue
		}
		gauge(c.pending, float64(info.NumPending), tool)
		gauge(c.ackPending, float64(info.NumAckPending), tool)
		gauge(c.redelivered, float64(info.NumRedelivered), tool)
		gauge(c.waiting, float64(info.NumWaiting), tool)
		p := 0.0
		if info.Paused {
			p = 1
		}
		gauge(c.paused, p, tool)
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("consumers of %s: %w", jetstream.StreamCalls, err)
	}

	if c.opts.DeadLetters != nil {
		counts, err := c.opts.DeadLetters(ctx, streams[jetstream.StreamDLQ])
		if err != nil {
			return nil, err
		}
		for tool, n := range counts {
			gauge(c.dlqDepth, float64(n), tool)
		}
	}
	return out, nil
}
