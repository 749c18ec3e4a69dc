package dispatch

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/orchestrator/sched"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Defaults of Config.
const (
	// DefaultTimeoutDefault is how long a call waits for its result when the
	// caller's context has no deadline.
	DefaultTimeoutDefault = 60 * time.Second
	// PublishTimeoutDefault is how long Dispatch waits for JetStream to
	// acknowledge one publish of a call before it publishes the call again.
	PublishTimeoutDefault = 5 * time.Second
	// PublishRetryForDefault is how long Dispatch keeps publishing calls that
	// JetStream did not acknowledge: long enough to ride out the election
	// of a new stream leader in a cluster (a few seconds).
	PublishRetryForDefault = 15 * time.Second
	// ResultCheckIntervalDefault is how often the dispatcher checks that its
	// result consumer still delivers while calls wait and no result came.
	ResultCheckIntervalDefault = 5 * time.Second
	// MaxPublishInFlightDefault caps the calls whose publish acknowledgement
	// is outstanding, across all Dispatch calls of one Dispatcher. It stays
	// below nats.go's own async publish cap (4000) so that cap never stalls.
	MaxPublishInFlightDefault = 1024
	// PublishAsyncTimeout is how long a publish of a call stays in the
	// dispatcher's table of pending PubAcks (pubAcks) before it fails with
	// jetstream.ErrAsyncPublishTimeout, and the js.WithPublishAsyncTimeout
	// to create a host's JetStream context with (nats.go's table, for a
	// JetStream used without the dispatcher's connection). Dispatch stops
	// waiting for a PubAck after PublishTimeout, but the table keeps the
	// publish until a reply or a reconnect; a PubAck lost with a stream
	// leader that died while the connection stayed up (it was to another
	// node) would stay there for good, and in nats.go's table, after enough
	// failovers, its cap (4000) would stall every publish. This timeout
	// clears such entries.
	PublishAsyncTimeout = 30 * time.Second
	// FailureThresholdDefault is the number of consecutive is_error results
	// of one tool in one session after which the content advises the model
	// to stop retrying.
	FailureThresholdDefault = 3
	// MaxSessionsDefault caps the sessions whose failure counts are kept.
	MaxSessionsDefault = 10_000
	// SessionTTLDefault is how long an idle session's failure counts are kept.
	SessionTTLDefault = time.Hour
	// RecentTTLDefault is how long a settled call (answered, expired or
	// abandoned) is remembered to tell late and duplicate results apart and
	// to answer a repeated call from the cached result.
	RecentTTLDefault = 10 * time.Minute
	// RecentMaxDefault caps the settled calls remembered.
	RecentMaxDefault = 100_000
	// RecentMaxBytesDefault caps the bytes of cached results kept for
	// settled calls.
	RecentMaxBytesDefault = 64 << 20
	// PresenceIntervalDefault is how often an orchestrator announces
	// itself to the others on jetstream.SchedPresenceSubject; one not
	// heard from for PresenceMissed intervals is gone.
	PresenceIntervalDefault = time.Second
	// PresenceMissed is how many presence intervals without a word make a
	// replica count as gone.
	PresenceMissed = 3
)

// Config configures a Dispatcher. The zero value of every field but JS/NC and
// Catalog takes its default.
type Config struct {
	// NC is the NATS connection. It is used only when JS is nil, to create
	// the JetStream context.
	NC *nats.Conn
	// JS is the JetStream context calls are published with and results are
	// consumed from. Required unless NC is set.
	JS js.JetStream
	// Instance is this orchestrator's id: calls carry it as reply_to and
	// results come back on tools.result.<Instance>. One subject token:
	// 1 to 64 letters, digits, '_' and '-' (jetstream.CheckToken). Default
	// a random id, unique per process.
	Instance string
	// Catalog says which tools exist. Required.
	Catalog Catalog
	// DefaultTimeout is how long a call waits for its result when the
	// caller's context has no deadline. Default DefaultTimeoutDefault.
	DefaultTimeout time.Duration
	// PublishTimeout bounds the wait for JetStream's acknowledgement (the
	// PubAck) of one publish of a call; a call not acknowledged in time is
	// published again while PublishRetryFor lasts. Default
	// PublishTimeoutDefault.
	PublishTimeout time.Duration
	// PublishRetryFor is how long, from the start of a turn's publishing,
	// Dispatch keeps publishing again (with the same Nats-Msg-Id, so
	// JetStream stores a call once) the calls whose PubAck failed or timed
	// out, with a jittered exponential backoff between attempts: a cluster
	// failover or a server restart of a few seconds then delays the turn
	// instead of failing it. Never past the turn's deadline, its ctx or
	// Stop; an error that another publish cannot cure (a message the stream
	// refuses, a permissions violation) fails the turn at once. When it is
	// spent, Dispatch returns an error wrapping ErrUnavailable. At least
	// PublishTimeout is always given to a first attempt. Default
	// PublishRetryForDefault; negative disables re-publishing (a failed or
	// timed-out PubAck fails the turn at once).
	PublishRetryFor time.Duration
	// MaxPublishInFlight caps unacknowledged publishes across all Dispatch
	// calls. Default MaxPublishInFlightDefault.
	MaxPublishInFlight int
	// ResultCheckInterval is how often, while calls wait and no result has
	// come for that long, the dispatcher asks the server whether results
	// are waiting that its result consumer has not delivered; if so, or if
	// the consumer is gone, it makes a new one (see Start). It also bounds
	// each try at making one. Default ResultCheckIntervalDefault; negative:
	// never check, and never replace the consumer (not even when it is
	// deleted or loses results).
	ResultCheckInterval time.Duration
	// MaxInputBytes caps a call's input JSON; a larger input is answered
	// with a validation is_error. Default envelope.MaxInputBytesDefault.
	MaxInputBytes int
	// FailureThreshold is the number of consecutive is_error results of one
	// tool in one session from which the content tells the model to use a
	// different approach. Default FailureThresholdDefault.
	FailureThreshold int
	// MaxSessions caps the sessions tracked for repeated failures; the least
	// recently used is forgotten first. Default MaxSessionsDefault.
	MaxSessions int
	// SessionTTL forgets a session's failure counts after this long without
	// a call. Default SessionTTLDefault.
	SessionTTL time.Duration
	// RecentTTL is how long settled calls (by call key) are remembered. Default
	// RecentTTLDefault.
	RecentTTL time.Duration
	// RecentMax caps the settled calls remembered. Default
	// RecentMaxDefault.
	RecentMax int
	// RecentMaxBytes caps the bytes of results cached for settled calls.
	// Default RecentMaxBytesDefault.
	RecentMaxBytes int64
	// Logger receives the dispatcher's logs. Default slog.Default().
	Logger *slog.Logger
	// Metrics receives the dispatcher's measurements. Default NopMetrics.
	Metrics Metrics
	// Tracer, when on, gives every call a span "call <tool>" from its
	// admission to its result, whose context the call carries to the
	// workers (calltrace.go). Default nil: off, and a call costs nothing
	// for it.
	Tracer *tracing.Tracer

	// MaxCallsInFlight caps the calls published and waiting for results
	// across all Dispatch calls; a turn past it is refused at once with a
	// *SaturatedError (admission.go). Default MaxCallsInFlightDefault;
	// negative: unbounded.
	MaxCallsInFlight int
	// MaxQueueDepth caps the calls waiting in one tool's consumer
	// (tool_<tool>, read from JetStream every QueueDepthRefresh); a turn
	// calling a tool whose queue is full is refused at once. Default
	// MaxQueueDepthDefault; negative: unbounded.
	MaxQueueDepth int
	// QueueDepthRefresh is how often a tool's queue depth is read while
	// it is called. Default QueueDepthRefreshDefault.
	QueueDepthRefresh time.Duration
	// SaturatedRetryAfter is when a refused turn is told to try again.
	// Default SaturatedRetryAfterDefault.
	SaturatedRetryAfter time.Duration
	// NoQueueWaitAdmission turns off refusing a turn whose calls cannot
	// start before its deadline: by default a turn calling a tool whose
	// queue holds more work than the turn has time left for (the queue
	// over the rate at which the tool's workers drained it while they were
	// saturated) is refused at once, like one past MaxQueueDepth.
	NoQueueWaitAdmission bool

	// NoFairness turns the fair-share scheduler off. By default (false)
	// the dispatcher lets at most a window of each tool's calls be in
	// flight — the tool's fleet slots (ToolInfo.Slots) plus WindowMargin;
	// a tool of unknown slots has no window — and holds the rest: a free
	// place goes to the waiting call of the highest priority, among those
	// to the fairness keys in weighted round robin, FIFO within a key; and
	// each key's calls are bounded by the tool's per-key limits
	// (ToolInfo.PerKey), this dispatcher applying its share of them among
	// the live orchestrators (PresenceInterval). With NoFairness calls are
	// published as they come, and no per-key limit applies.
	NoFairness bool
	// WindowMargin is a tool's window beyond its slots, as a fraction of
	// them (at least sched.MinMarginDefault calls): enough for the workers
	// to find their next calls queued, little enough that a new key's call
	// waits behind at most that many. Default sched.MarginDefault;
	// negative: no margin.
	WindowMargin float64
	// StaleAfter is the least time after its publish a call stops
	// counting against its tool's window, so that calls waiting out a
	// retry's backoff in JetStream do not leave the workers idle: a call
	// goes stale after four times the tool's average time from publish to
	// result, at least StaleAfter (ten times StaleAfter before any call of
	// the tool was answered). It still counts against its key's
	// concurrency cap. Default sched.StaleMinDefault; negative: calls
	// never go stale.
	StaleAfter time.Duration
	// PresenceInterval is how often the dispatcher announces itself to
	// the other orchestrators (jetstream.SchedPresenceSubject); one not
	// heard from for PresenceMissed intervals no longer shares the per-key
	// limits. Default PresenceIntervalDefault.
	PresenceInterval time.Duration
}

// WithDefaults returns c with zero fields set to their defaults. A missing
// Instance gets a fresh random id.
func (c Config) WithDefaults() Config {
	if c.Instance == "" {
		c.Instance = newInstanceID()
	}
	c.DefaultTimeout = cmp.Or(c.DefaultTimeout, DefaultTimeoutDefault)
	c.PublishTimeout = cmp.Or(c.PublishTimeout, PublishTimeoutDefault)
	c.PublishRetryFor = cmp.Or(c.PublishRetryFor, PublishRetryForDefault)
	c.ResultCheckInterval = cmp.Or(c.ResultCheckInterval, ResultCheckIntervalDefault)
	c.MaxPublishInFlight = cmp.Or(c.MaxPublishInFlight, MaxPublishInFlightDefault)
	c.MaxInputBytes = cmp.Or(c.MaxInputBytes, envelope.MaxInputBytesDefault)
	c.FailureThreshold = cmp.Or(c.FailureThreshold, FailureThresholdDefault)
	c.MaxSessions = cmp.Or(c.MaxSessions, MaxSessionsDefault)
	c.SessionTTL = cmp.Or(c.SessionTTL, SessionTTLDefault)
	c.RecentTTL = cmp.Or(c.RecentTTL, RecentTTLDefault)
	c.RecentMax = cmp.Or(c.RecentMax, RecentMaxDefault)
	c.RecentMaxBytes = cmp.Or(c.RecentMaxBytes, RecentMaxBytesDefault)
	c.MaxCallsInFlight = cmp.Or(c.MaxCallsInFlight, MaxCallsInFlightDefault)
	c.MaxQueueDepth = cmp.Or(c.MaxQueueDepth, MaxQueueDepthDefault)
	c.QueueDepthRefresh = cmp.Or(max(c.QueueDepthRefresh, 0), QueueDepthRefreshDefault)
	c.SaturatedRetryAfter = cmp.Or(max(c.SaturatedRetryAfter, 0), SaturatedRetryAfterDefault)
	c.WindowMargin = cmp.Or(c.WindowMargin, sched.MarginDefault)
	c.PresenceInterval = cmp.Or(max(c.PresenceInterval, 0), PresenceIntervalDefault)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = NopMetrics{}
	}
	return c
}

// Validate names the first bad field. It expects defaults to be applied:
// a zero duration or count is reported as not positive.
func (c Config) Validate() error {
	instanceErr := jetstream.CheckToken("instance", c.Instance)
	switch {
	case c.JS == nil && c.NC == nil:
		return errors.New("dispatch: Config.JS is required (or Config.NC to create it)")
	case c.Catalog == nil:
		return errors.New("dispatch: Config.Catalog is required")
	case instanceErr != nil:
		return fmt.Errorf("dispatch: Config.Instance: %w", instanceErr)
	case c.DefaultTimeout <= 0:
		return fmt.Errorf("dispatch: Config.DefaultTimeout must be positive, got %v", c.DefaultTimeout)
	case c.PublishTimeout <= 0:
		return fmt.Errorf("dispatch: Config.PublishTimeout must be positive, got %v", c.PublishTimeout)
	case c.MaxPublishInFlight <= 0:
		return fmt.Errorf("dispatch: Config.MaxPublishInFlight must be positive, got %d", c.MaxPublishInFlight)
	case c.MaxInputBytes <= 0:
		return fmt.Errorf("dispatch: Config.MaxInputBytes must be positive, got %d", c.MaxInputBytes)
	case c.FailureThreshold <= 0:
		return fmt.Errorf("dispatch: Config.FailureThreshold must be positive, got %d", c.FailureThreshold)
	case c.MaxSessions <= 0:
		return fmt.Errorf("dispatch: Config.MaxSessions must be positive, got %d", c.MaxSessions)
	case c.SessionTTL <= 0:
		return fmt.Errorf("dispatch: Config.SessionTTL must be positive, got %v", c.SessionTTL)
	case c.RecentTTL <= 0:
		return fmt.Errorf("dispatch: Config.RecentTTL must be positive, got %v", c.RecentTTL)
	case c.RecentMax <= 0:
		return fmt.Errorf("dispatch: Config.RecentMax must be positive, got %d", c.RecentMax)
	case c.RecentMaxBytes <= 0:
		return fmt.Errorf("dispatch: Config.RecentMaxBytes must be positive, got %d", c.RecentMaxBytes)
	case math.IsNaN(c.WindowMargin) || math.IsInf(c.WindowMargin, 0):
		return fmt.Errorf("dispatch: Config.WindowMargin must be a finite number, got %v", c.WindowMargin)
	case c.Logger == nil:
		return errors.New("dispatch: Config.Logger is nil")
	case c.Metrics == nil:
		return errors.New("dispatch: Config.Metrics is nil")
	}
	return nil
}

func newInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "orch-" + hex.EncodeToString(b[:])
}
