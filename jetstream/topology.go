package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/subject"
)

// Stream names, fixed by the design.
const (
	StreamCalls   = "TOOL_CALLS"
	StreamResults = "TOOL_RESULTS"
	StreamDLQ     = "TOOL_DLQ"
)

// Subject prefixes, fixed by the design.
const (
	CallSubjectPrefix   = "tools.call."
	ResultSubjectPrefix = "tools.result."
	DLQSubjectPrefix    = "tools.dlq."
	ConsumerPrefix      = "tool_"
	// CancelSubjectPrefix and ProgressSubjectPrefix are core NATS subjects
	// (no stream holds them): a caller's cancellation of a call, and a
	// running call's progress reports.
	CancelSubjectPrefix = "tools.cancel."
	// SchedStatsSubject is the core NATS subject on which every
	// orchestrator answers a request with its scheduler's sched.Snapshot
	// (JSON): the fair shares, limits and priorities it holds.
	SchedStatsSubject = "toolpool.sched.stats"
	// SchedPresenceSubject is the core NATS subject on which orchestrators
	// announce themselves to each other (so that each knows how many share
	// the fleet-wide per-key limits).
	SchedPresenceSubject = "toolpool.sched.presence"
	// AdviceSubject is the core NATS subject on which orchestrators tell
	// each other of the is_error results they counted per host
	// conversation and tool, so that the repeated-failure advice counts
	// across replicas.
	AdviceSubject         = "toolpool.advice.streaks"
	ProgressSubjectPrefix = "tools.progress."
)

// HeaderProgress on a call message says that its caller asked for the
// call's progress: the worker then publishes the tool's reports on
// ProgressSubject. Its only value is "1".
const HeaderProgress = "Toolpool-Progress"

// CancelSubject is the core NATS subject on which an orchestrator cancels
// the call with key key of tool: tools.cancel.<tool>.<key>. The body is the
// call message's stream sequence in TOOL_CALLS, in decimal: a worker cancels
// that message only, so a later message of the same call (the caller sent it
// again) is not cancelled with it.
func CancelSubject(tool, key string) string { return CancelSubjectPrefix + tool + "." + key }

// CancelFilter matches every cancellation: tools.cancel.>. Workers
// subscribe to it.
const CancelFilter = CancelSubjectPrefix + ">"

// ProgressSubject is the core NATS subject on which a worker reports the
// progress of the call with key key to orchestrator instance:
// tools.progress.<instance>.<key>.
func ProgressSubject(instance, key string) string {
	return ProgressSubjectPrefix + instance + "." + key
}

// ProgressFilter matches the progress reports for instance:
// tools.progress.<instance>.>.
func ProgressFilter(instance string) string { return ProgressSubjectPrefix + instance + ".>" }

// CallSubject is the subject a call to tool is published on.
func CallSubject(tool string) string { return CallSubjectPrefix + tool }

// ResultSubject is the subject the result of the call with key key (see
// envelope.CallKey) is published on for orchestrator instance:
// tools.result.<instance>.<key>.
func ResultSubject(instance, key string) string { return ResultSubjectPrefix + instance + "." + key }

// ResultFilter is the filter subject of instance's result consumer:
// tools.result.<instance>.>.
func ResultFilter(instance string) string { return ResultSubjectPrefix + instance + ".>" }

// ResultKeySubject matches the result of the call with key key whichever
// instance it was published for: tools.result.*.<key>. A last-by-subject
// get on TOOL_RESULTS with it (the server accepts wildcards there) finds a
// stored result; a core NATS subscription to it sees one published later.
func ResultKeySubject(key string) string { return ResultSubjectPrefix + "*." + key }

// LastResult returns the stored result of the call with key key, whichever
// instance it was published for, from results (the TOOL_RESULTS stream); an
// error wrapping js.ErrMsgNotFound when there is none.
func LastResult(ctx context.Context, results js.Stream, key string) (*js.RawStreamMsg, error) {
	return results.GetLastMsgForSubject(ctx, ResultKeySubject(key))
}

// ResultMsgID is the Nats-Msg-Id of a result for instance: the instance and
// the call key. Results are deduplicated per instance, not per key alone, so
// that a stored result handed on to another instance (a call re-posted there
// after its duplicate window) is not dropped as a duplicate of the first.
func ResultMsgID(instance, key string) string { return instance + "." + key }

// DLQSubject is the subject dead letters of tool are published on.
func DLQSubject(tool string) string { return DLQSubjectPrefix + tool }

// ConsumerName is the durable pull consumer of tool on TOOL_CALLS.
func ConsumerName(tool string) string { return ConsumerPrefix + tool }

// MaxDeliveriesAdvisorySubject is the subject on which the server announces
// that a call to tool reached its consumer's MaxDeliver without being acked
// or terminated (a worker crashed on every delivery, or the dead-letter
// publish itself kept failing). The server then stops delivering that call.
func MaxDeliveriesAdvisorySubject(tool string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + StreamCalls + "." + ConsumerName(tool)
}

// Defaults of Config.
const (
	ReplicasDefault        = 1
	MaxMsgSizeDefault      = 2 << 20 // 2 MiB
	DuplicateWindowDefault = 2 * time.Minute
	ResultsMaxAgeDefault   = time.Hour
	DLQMaxAgeDefault       = 30 * 24 * time.Hour
	DLQMaxBytesDefault     = 1 << 30 // 1 GiB
)

// Limits Config.Validate enforces.
const (
	// DuplicateWindowMin is the shortest dedup window accepted: a call or
	// result republished after a reconnect or a worker crash must still be
	// recognised as a duplicate.
	DuplicateWindowMin = 2 * time.Minute
	// MaxMsgSizeMax is the largest per-message limit accepted; it is the
	// largest max_payload nats-server accepts without warning.
	MaxMsgSizeMax = 8 << 20
)

// Config is the stream topology's settings. The zero value, after
// WithDefaults, is the topology of a single embedded server.
type Config struct {
	// Replicas of every stream: 1 on a single server, 3 (or 5) on a
	// cluster. Must be odd, 1 to 5. Default ReplicasDefault (1).
	Replicas int
	// Storage of every stream. The zero value is js.FileStorage (default).
	Storage js.StorageType
	// MaxMsgSize is the largest call or result message TOOL_CALLS and
	// TOOL_RESULTS accept, in bytes. The server's max_payload must be at
	// least this large (the embedded server's is 8 MiB; a stock
	// nats-server's is 1 MiB). Default MaxMsgSizeDefault (2 MiB).
	MaxMsgSize int32
	// DuplicateWindow is how long the streams remember a Nats-Msg-Id (the
	// call key) to drop a second publish of the same call, result or dead
	// letter. At least DuplicateWindowMin. Default DuplicateWindowDefault (2m).
	DuplicateWindow time.Duration
	// ResultsMaxAge is how long TOOL_RESULTS keeps a result.
	// Default ResultsMaxAgeDefault (1h).
	ResultsMaxAge time.Duration
	// DLQMaxAge is how long TOOL_DLQ keeps a dead letter.
	// Default DLQMaxAgeDefault (30 days).
	DLQMaxAge time.Duration
	// DLQMaxBytes caps TOOL_DLQ's size; the oldest dead letters are dropped
	// beyond it. -1 means no cap. Default DLQMaxBytesDefault (1 GiB).
	DLQMaxBytes int64
	// CallsMaxAge, when positive, drops queued calls older than this. By
	// default (0) calls never expire in the stream: each call carries its
	// own deadline, which workers honour.
	CallsMaxAge time.Duration
	// CallsMaxBytes, when positive, caps TOOL_CALLS's size; beyond it new
	// calls are refused (discard new) so publishers see back-pressure
	// instead of queued calls vanishing. Default 0: no cap.
	CallsMaxBytes int64
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Replicas = cmp.Or(c.Replicas, ReplicasDefault)
	c.MaxMsgSize = cmp.Or(c.MaxMsgSize, MaxMsgSizeDefault)
	c.DuplicateWindow = cmp.Or(c.DuplicateWindow, DuplicateWindowDefault)
	c.ResultsMaxAge = cmp.Or(c.ResultsMaxAge, ResultsMaxAgeDefault)
	c.DLQMaxAge = cmp.Or(c.DLQMaxAge, DLQMaxAgeDefault)
	c.DLQMaxBytes = cmp.Or(c.DLQMaxBytes, DLQMaxBytesDefault)
	return c
}

// Validate reports the first setting of c that cannot work, naming it.
// Call it on c.WithDefaults(): zero values are invalid.
func (c Config) Validate() error {
	switch {
	case c.Replicas < 1 || c.Replicas > 5 || c.Replicas%2 == 0:
		return fmt.Errorf("jetstream: Config.Replicas is %d; want 1, 3 or 5", c.Replicas)
	case c.Storage != js.FileStorage && c.Storage != js.MemoryStorage:
		return fmt.Errorf("jetstream: Config.Storage is %d; want file or memory storage", c.Storage)
	case c.MaxMsgSize <= 0 || c.MaxMsgSize > MaxMsgSizeMax:
		return fmt.Errorf("jetstream: Config.MaxMsgSize is %d; want 1 to %d bytes", c.MaxMsgSize, MaxMsgSizeMax)
	case c.DuplicateWindow < DuplicateWindowMin:
		return fmt.Errorf("jetstream: Config.DuplicateWindow is %v; want at least %v so republished calls and results are deduplicated",
			c.DuplicateWindow, DuplicateWindowMin)
	case c.ResultsMaxAge < c.DuplicateWindow:
		return fmt.Errorf("jetstream: Config.ResultsMaxAge is %v; want at least DuplicateWindow (%v)", c.ResultsMaxAge, c.DuplicateWindow)
	case c.DLQMaxAge < c.DuplicateWindow:
		return fmt.Errorf("jetstream: Config.DLQMaxAge is %v; want at least DuplicateWindow (%v)", c.DLQMaxAge, c.DuplicateWindow)
	case c.DLQMaxBytes <= 0 && c.DLQMaxBytes != -1:
		return fmt.Errorf("jetstream: Config.DLQMaxBytes is %d; want a positive size or -1 for no cap", c.DLQMaxBytes)
	case c.CallsMaxAge < 0 || (c.CallsMaxAge > 0 && c.CallsMaxAge < c.DuplicateWindow):
		return fmt.Errorf("jetstream: Config.CallsMaxAge is %v; want 0 (no expiry) or at least DuplicateWindow (%v)", c.CallsMaxAge, c.DuplicateWindow)
	case c.CallsMaxBytes < 0:
		return fmt.Errorf("jetstream: Config.CallsMaxBytes is %d; want 0 (no cap) or a positive size", c.CallsMaxBytes)
	}
	return nil
}

// unlimited is the server's value for "no limit" on counts and sizes.
const unlimited = -1

func orUnlimited[T int64 | int32](v T) T {
	if v <= 0 {
		return unlimited
	}
	return v
}

// StreamConfigs returns the three streams' configurations, TOOL_CALLS,
// TOOL_RESULTS and TOOL_DLQ in that order. Zero fields of cfg take their
// defaults; cfg is not validated (Provision does that).
func StreamConfigs(cfg Config) []js.StreamConfig {
	cfg = cfg.WithDefaults()
	base := js.StreamConfig{
		MaxConsumers:      unlimited,
		MaxMsgs:           unlimited,
		MaxMsgsPerSubject: unlimited,
		Storage:           cfg.Storage,
		Replicas:          cfg.Replicas,
		Duplicates:        cfg.DuplicateWindow,
		Compression:       js.NoCompression,
	}

	calls := base
	calls.Name = StreamCalls
	calls.Description = "toolpool: queued tool calls, one durable pull consumer per tool"
	calls.Subjects = []string{CallSubjectPrefix + ">"}
	calls.Retention = js.WorkQueuePolicy
	calls.MaxAge = cfg.CallsMaxAge
	calls.MaxBytes = orUnlimited(cfg.CallsMaxBytes)
	calls.MaxMsgSize = cfg.MaxMsgSize
	calls.Discard = js.DiscardNew
	// Direct gets let `nats stream view TOOL_CALLS` page the queue (a
	// work-queue stream has no other way to be read without taking its
	// calls). toolpool's own decisions read it through GetMsgFromLeader.
	calls.AllowDirect = true

	results := base
	results.Name = StreamResults
	results.Description = "toolpool: tool results by orchestrator instance and call key"
	results.Subjects = []string{ResultSubjectPrefix + ">"}
	results.Retention = js.LimitsPolicy
	results.MaxAge = cfg.ResultsMaxAge
	results.MaxBytes = unlimited
	results.MaxMsgSize = cfg.MaxMsgSize
	results.Discard = js.DiscardOld

	dlq := base
	dlq.Name = StreamDLQ
	dlq.Description = "toolpool: dead-lettered tool calls with every attempt's error"
	dlq.Subjects = []string{DLQSubjectPrefix + ">"}
	dlq.Retention = js.LimitsPolicy
	dlq.MaxAge = cfg.DLQMaxAge
	dlq.MaxBytes = orUnlimited(cfg.DLQMaxBytes)
	// A dead letter holds the whole call plus its attempts' errors, so it
	// is not held to MaxMsgSize; the server's max_payload bounds it.
	dlq.MaxMsgSize = unlimited
	dlq.Discard = js.DiscardOld

	return []js.StreamConfig{calls, results, dlq}
}

// ErrStreamConflict matches (with errors.Is) the error Provision returns
// when an existing stream disagrees with the topology on a setting toolpool
// never changes in place.
var ErrStreamConflict = errors.New("jetstream: existing stream conflicts with the topology")

// SettingDiff is one setting on which an existing stream differs from the
// topology, named as in the server's stream config JSON.
type SettingDiff struct {
	Setting string // e.g. "retention"
	Have    string // the existing stream's value
	Want    string // the topology's value
}

// ConflictError is returned by Provision when an existing stream's
// subjects, retention, storage or replicas differ from the topology.
// Provision does not change those in place: they decide where calls go
// and whether they survive, so an operator must fix or remove the stream.
type ConflictError struct {
	Stream string
	Diffs  []SettingDiff
}

// Error reads e.g. "jetstream: stream TOOL_CALLS exists with
// retention=limits, want workqueue".
func (e *ConflictError) Error() string {
	parts := make([]string, len(e.Diffs))
	for i, d := range e.Diffs {
		parts[i] = d.Setting + "=" + d.Have + ", want " + d.Want
	}
	return "jetstream: stream " + e.Stream + " exists with " + strings.Join(parts, "; ")
}

// Is reports whether target is ErrStreamConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrStreamConflict }

// Provision creates the streams or checks that existing ones agree; it is
// idempotent. A conflicting existing stream gives an error naming the setting.
//
// Zero fields of cfg take their defaults and the result is validated. On an
// existing stream, subjects, retention, storage and replicas must match
// (else a *ConflictError); the limits max_age, max_bytes, max_msgs,
// max_msg_size, duplicate_window and discard are brought to cfg's values
// with an in-place update, and allow_direct is turned on where the topology
// wants it (TOOL_CALLS), leaving every setting toolpool does not manage
// as the operator left it. An existing stream that already agrees is not
// touched.
func Provision(ctx context.Context, j js.JetStream, cfg Config) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, want := range StreamConfigs(cfg) {
		if err := provisionStream(ctx, j, want); err != nil {
			return err
		}
	}
	return nil
}

func provisionStream(ctx context.Context, j js.JetStream, want js.StreamConfig) error {
	s, err := j.Stream(ctx, want.Name)
	if errors.Is(err, js.ErrStreamNotFound) {
		_, err = j.CreateStream(ctx, want)
		if err == nil {
			return nil
		}
		if !errors.Is(err, js.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("jetstream: create stream %s: %w", want.Name, err)
		}
		// Another process created it between our look-up and our create,
		// with a different config: check that one like any existing stream.
		s, err = j.Stream(ctx, want.Name)
	}
	if err != nil {
		return fmt.Errorf("jetstream: look up stream %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config
	if diffs := conflicts(want, have); len(diffs) > 0 {
		return &ConflictError{Stream: want.Name, Diffs: diffs}
	}
	updated, changed := withLimitsOf(have, want)
	if !changed {
		return nil
	}
	if _, err := j.UpdateStream(ctx, updated); err != nil {
		return fmt.Errorf("jetstream: update limits of stream %s: %w", want.Name, err)
	}
	return nil
}

// conflicts lists the settings toolpool never changes in place on which
// have differs from want.
func conflicts(want, have js.StreamConfig) []SettingDiff {
	var diffs []SettingDiff
	add := func(setting, h, w string) {
		if h != w {
			diffs = append(diffs, SettingDiff{Setting: setting, Have: h, Want: w})
		}
	}
	add("subjects", subjectsString(have.Subjects), subjectsString(want.Subjects))
	add("retention", jsonName(have.Retention), jsonName(want.Retention))
	add("storage", jsonName(have.Storage), jsonName(want.Storage))
	add("num_replicas", strconv.Itoa(max(have.Replicas, 1)), strconv.Itoa(want.Replicas))
	return diffs
}

// withLimitsOf returns have with want's limits (and direct gets where want
// allows them), and whether any changed.
// Limits the server stores as -1 when given 0 compare as equal.
func withLimitsOf(have, want js.StreamConfig) (js.StreamConfig, bool) {
	changed := false
	if have.MaxAge != want.MaxAge {
		have.MaxAge, changed = want.MaxAge, true
	}
	if orUnlimited(have.MaxBytes) != orUnlimited(want.MaxBytes) {
		have.MaxBytes, changed = want.MaxBytes, true
	}
	if orUnlimited(have.MaxMsgs) != orUnlimited(want.MaxMsgs) {
		have.MaxMsgs, changed = want.MaxMsgs, true
	}
	if orUnlimited(have.MaxMsgSize) != orUnlimited(want.MaxMsgSize) {
		have.MaxMsgSize, changed = want.MaxMsgSize, true
	}
	if have.Duplicates != want.Duplicates {
		have.Duplicates, changed = want.Duplicates, true
	}
	if have.Discard != want.Discard {
		have.Discard, changed = want.Discard, true
	}
	// Turned on, never off: an operator may allow direct gets on the
	// other streams too.
	if want.AllowDirect && !have.AllowDirect {
		have.AllowDirect, changed = true, true
	}
	return have, changed
}

func subjectsString(subjects []string) string {
	s := slices.Clone(subjects)
	slices.Sort(s)
	return "[" + strings.Join(s, " ") + "]"
}

// jsonName is the name a policy has in the server's config JSON
// ("workqueue", "file", ...).
func jsonName(v interface{ MarshalJSON() ([]byte, error) }) string {
	b, err := v.MarshalJSON()
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.Trim(string(b), `"`)
}

// Defaults of ConsumerSpec. They equal the tool defaults of pkg/tools and
// pkg/classify (a test checks it).
const (
	ConsumerTimeoutDefault     = 30 * time.Second
	ConsumerMaxAttemptsDefault = 3
	ConsumerConcurrencyDefault = 1000
)

// The liveness window of a tool's consumer, and its MaxDeliver margin.
const (
	// AckWaitDefault is the AckWait of every tool's consumer: a liveness
	// window, not the tool's timeout. A worker sends an in-progress ack
	// every HeartbeatFor(AckWait) (5 s) for each call it holds, running or
	// queued for a slot, so a live worker keeps a call of any length; a call
	// whose worker died (kill -9, a lost machine) or whose delivery was lost
	// (a server restart) is delivered again at most AckWait after the last
	// heartbeat, whatever the tool's timeout.
	AckWaitDefault = 20 * time.Second
	// AckWaitMin is the shortest AckWait ConsumerSpec.Validate accepts:
	// heartbeats a quarter of it apart must still get through a busy server.
	AckWaitMin = time.Second
	// MaxDeliverMargin is added to a tool's MaxAttempts to give its
	// consumer's MaxDeliver. Deliveries past MaxAttempts happen only when a
	// worker died mid-call or handed the call back on shutdown (neither
	// reported an outcome); the worker still runs the call then, and
	// dead-letters it if that attempt fails too. A call that kills the worker
	// on every delivery stops at MaxDeliver, where the orchestrator's poison
	// watcher dead-letters it.
	MaxDeliverMargin = 2
)

// HeartbeatFor is how often a worker sends an in-progress ack for each call
// it holds on a consumer with AckWait ackWait: a quarter of it, so that
// three heartbeats in a row may be late or lost before the call is
// delivered again.
func HeartbeatFor(ackWait time.Duration) time.Duration {
	return ackWait / 4
}

// ConsumerSpec is what a tool's consumer is derived from.
type ConsumerSpec struct {
	Tool        string        // ^[a-zA-Z0-9_-]{1,64}$
	Timeout     time.Duration // per attempt. Default ConsumerTimeoutDefault (30s).
	AckWait     time.Duration // liveness window, independent of Timeout. Default AckWaitDefault (20s).
	MaxAttempts int           // executions in all. Default ConsumerMaxAttemptsDefault (3).
	Concurrency int           // fleet-wide cap: MaxAckPending. Default ConsumerConcurrencyDefault (1000).
}

// WithDefaults returns s with zero fields set to their defaults.
func (s ConsumerSpec) WithDefaults() ConsumerSpec {
	if s.Timeout == 0 {
		s.Timeout = ConsumerTimeoutDefault
	}
	if s.MaxAttempts == 0 {
		s.MaxAttempts = ConsumerMaxAttemptsDefault
	}
	if s.Concurrency == 0 {
		s.Concurrency = ConsumerConcurrencyDefault
	}
	if s.AckWait == 0 {
		s.AckWait = AckWaitDefault
	}
	return s
}

// Validate reports the first field of s that cannot work, naming it. Call
// it on s.WithDefaults(): zero values are invalid.
func (s ConsumerSpec) Validate() error {
	switch {
	case CheckToken("tool", s.Tool) != nil:
		return fmt.Errorf("jetstream: ConsumerSpec.Tool %q is not a valid tool name (%s)", s.Tool, subject.TokenChars)
	case s.Timeout <= 0:
		return fmt.Errorf("jetstream: ConsumerSpec.Timeout of tool %s is %v; want a positive duration", s.Tool, s.Timeout)
	case s.MaxAttempts < 1:
		return fmt.Errorf("jetstream: ConsumerSpec.MaxAttempts of tool %s is %d; want at least 1", s.Tool, s.MaxAttempts)
	case s.Concurrency < 1:
		return fmt.Errorf("jetstream: ConsumerSpec.Concurrency of tool %s is %d; want at least 1", s.Tool, s.Concurrency)
	case s.AckWait < AckWaitMin:
		return fmt.Errorf("jetstream: ConsumerSpec.AckWait of tool %s is %v; want at least %v", s.Tool, s.AckWait, AckWaitMin)
	}
	return nil
}

// ConsumerConfig is the durable pull consumer config of a tool. Zero fields
// of spec take their defaults.
//
// Delays between attempts come from the worker's NakWithDelay, so the
// config has no BackOff list; MaxDeliver is only the backstop for calls
// that keep crashing workers.
func ConsumerConfig(spec ConsumerSpec) js.ConsumerConfig {
	spec = spec.WithDefaults()
	return js.ConsumerConfig{
		Durable:       ConsumerName(spec.Tool),
		Description:   "toolpool: tool " + spec.Tool,
		FilterSubject: CallSubject(spec.Tool),
		DeliverPolicy: js.DeliverAllPolicy,
		AckPolicy:     js.AckExplicitPolicy,
		AckWait:       spec.AckWait,
		MaxDeliver:    spec.MaxAttempts + MaxDeliverMargin,
		MaxAckPending: spec.Concurrency,
		ReplayPolicy:  js.ReplayInstantPolicy,
	}
}

// EnsureConsumer creates or updates the tool's consumer and returns it. An
// existing consumer is brought to spec in place (its AckWait too: a
// consumer made by an older version, with AckWait = timeout + 5 s, gets the
// liveness window).
// Zero fields of spec take their defaults; TOOL_CALLS must exist (see
// Provision).
func EnsureConsumer(ctx context.Context, j js.JetStream, spec ConsumerSpec) (js.Consumer, error) {
	spec = spec.WithDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	c, err := j.CreateOrUpdateConsumer(ctx, StreamCalls, ConsumerConfig(spec))
	if errors.Is(err, js.ErrStreamNotFound) {
		return nil, fmt.Errorf("jetstream: consumer %s: stream %s does not exist; provision the streams first: %w",
			ConsumerName(spec.Tool), StreamCalls, err)
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: create or update consumer %s on %s: %w", ConsumerName(spec.Tool), StreamCalls, err)
	}
	return c, nil
}

// ResultConsumerInactive is how long the server keeps a result consumer
// nobody pulls from (its orchestrator died, or was disconnected that long).
const ResultConsumerInactive = 5 * time.Minute

// ResultConsumerConfig is the configuration of an ephemeral consumer, named
// name, that reads the results for orchestrator instance from stream
// sequence from on: no acks (results need none: a result seen twice is
// recognised by its call key), one replica in memory (a replicated consumer
// would replicate its state on every result), and deleted by the server
// after ResultConsumerInactive without pulls.
func ResultConsumerConfig(name, instance string, from uint64) js.ConsumerConfig {
	return js.ConsumerConfig{
		Name:              name,
		Description:       "results for orchestrator instance " + instance,
		FilterSubject:     ResultFilter(instance),
		DeliverPolicy:     js.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		AckPolicy:         js.AckNonePolicy,
		InactiveThreshold: ResultConsumerInactive,
		Replicas:          1,
		MemoryStorage:     true,
	}
}
