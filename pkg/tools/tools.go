package tools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolpool/toolpool/internal/infra/callctx"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Defaults for a tool's settings.
const (
	TimeoutDefault     = 30 * time.Second // Tool.Timeout: per attempt
	ConcurrencyDefault = 1000             // Tool.Concurrency: fleet-wide cap on calls in flight (MaxAckPending)
)

// Output is what a handler returns on success.
type Output struct {
	Content envelope.Content // what the model reads: text blocks, images, documents
}

// Text is an Output with one text block.
func Text(s string) Output { return Output{Content: envelope.Text(s)} }

// Handler executes a tool call. The input has already passed the tool's
// schema. Errors are classified by classify.Classify; wrap them with
// classify.Transient, classify.Permanent, classify.RetryAfter or return a
// *classify.HTTPError to say what they are.
type Handler func(ctx context.Context, input json.RawMessage) (Output, error)

// Tool is a tool's definition.
type Tool struct {
	Name        string          // ^[a-zA-Z0-9_-]{1,64}$
	Description string          // for the model
	InputSchema json.RawMessage // JSON Schema; root must be type: object
	Timeout     time.Duration   // per attempt. Default TimeoutDefault.
	Retry       classify.Policy // zero fields take classify's defaults
	Idempotent  bool            // safe to execute twice
	// Hints tell agent hosts what the tool does to the world, where known
	// (MCP's tool annotations): an MCP backend takes them from its server,
	// a catalog entry may set them.
	Hints       Hints
	Concurrency int     // fleet-wide cap on calls in flight. Default ConcurrencyDefault.
	Handler     Handler // runs a call whose input passed InputSchema. Required.
	// PauseOn429Above, when positive, pauses the tool for the whole fleet
	// (its consumer, on the server) when its downstream answers HTTP 429
	// with a Retry-After above this: no worker takes its calls until the
	// Retry-After (capped at Retry.MaxDelay) has passed. Default 0: never.
	// Set it only for a tool that talks to one downstream: a rate limit of
	// one site should not stop a tool that fetches any URL.
	PauseOn429Above time.Duration
	// Fairness names the key between which the tool's free slots are
	// shared when its workers are saturated (see docs/operations.md, "Fair
	// shares"): FairnessTenant (the default, also for ""), FairnessSession,
	// or FairnessInputPrefix followed by the name of a top-level field of
	// the input whose value is the key.
	Fairness string
	// PerKey limits each fairness key of the tool, fleet-wide; zero fields
	// set no limit.
	PerKey KeyLimits
	// Cost is how many cost units one call of the tool spends of a budget
	// counted in cost units (docs/operations.md, "Budgets"). Default 1
	// (for 0).
	Cost int
	// Cache, when set, lets the orchestrators answer a call from a shared
	// result cache, and run identical calls in flight once (see
	// CachePolicy). Only a tool that is Idempotent or read-only
	// (Hints.ReadOnly) may set it.
	Cache *CachePolicy
	// Approval, when set, holds the tool's calls (or those whose input
	// matches its rule) until a person approves them (see ApprovalRule).
	Approval *ApprovalRule
}

// Fairness keys of Tool.Fairness.
const (
	// FairnessTenant shares the tool's slots between tenants (the API
	// keys' tenants): the default.
	FairnessTenant = "tenant"
	// FairnessSession shares them between sessions (a tenant's sessions
	// are keys of their own).
	FairnessSession = "session"
	// FairnessInputPrefix, followed by a field name ("input.repo"), shares
	// them between the values of that top-level field of the call's input
	// (within each tenant).
	FairnessInputPrefix = "input."
)

// KeyLimits bound what one fairness key takes of a tool, across every
// worker and orchestrator. A call over its key's limit waits (it is not
// failed) until its deadline.
type KeyLimits struct {
	// Concurrency, when positive, is how many of the tool's calls of one
	// key may be in flight at once (published and not yet answered).
	Concurrency int `json:"concurrency,omitempty"`
	// Rate, when positive, is how many calls of one key may start per Per.
	Rate int `json:"rate,omitempty"`
	// Per is the period of Rate. Default time.Second when Rate is set.
	Per time.Duration `json:"per_ns,omitempty"`
	// Burst is how many calls of one key may start at once after a quiet
	// period. Default Rate.
	Burst int `json:"burst,omitempty"`
}

// IsZero reports whether l sets no limit.
func (l KeyLimits) IsZero() bool { return l.Concurrency <= 0 && l.Rate <= 0 }

// Hints say what a tool does to the world, as MCP's tool annotations do;
// nil means not known (MCP's defaults then apply: not read-only,
// destructive, open world).
type Hints struct {
	// ReadOnly: the tool changes nothing.
	ReadOnly *bool `json:"read_only,omitempty"`
	// Destructive: the tool may delete or overwrite (meaningful when not
	// read-only).
	Destructive *bool `json:"destructive,omitempty"`
	// OpenWorld: the tool reaches outside systems (the web, other
	// services), not only a closed domain.
	OpenWorld *bool `json:"open_world,omitempty"`
}

// Definition is a tool in the Anthropic Messages API tools format.
type Definition struct {
	Name        string          `json:"name"`                  // Tool.Name
	Description string          `json:"description,omitempty"` // Tool.Description
	InputSchema json.RawMessage `json:"input_schema"`          // Tool.InputSchema
}

// CallInfo describes the call a handler is executing; see CallInfoFrom.
type CallInfo struct {
	ID string // the model's tool_use id
	// Key is the call's identity (envelope.CallKey): the same key is the
	// same call, whichever delivery or re-post runs it.
	Key      string
	Tool     string    // the tool's name
	Tenant   string    // the caller's tenant; "" for none
	Session  string    // the caller's session; "" for none
	Attempt  int       // 1-based
	Deadline time.Time // when the call as a whole gives up; zero: none
	WorkerID string    // the worker running the attempt
	// Traceparent is the call's W3C trace context, to send on outgoing requests.
	Traceparent string
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying ci.
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// CallInfoFrom returns the CallInfo the worker put in ctx: set by
// WithCallInfo, else by the worker's context (the call it runs).
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	if ci, ok := ctx.Value(callInfoKey{}).(CallInfo); ok {
		return ci, true
	}
	if c, ok := ctx.Value(callctx.Key{}).(runningCall); ok && c != nil {
		return c.CallInfo(), true
	}
	return CallInfo{}, false
}

// runningCall is the call a handler's context belongs to, as the worker
// running it describes it: its CallInfo, and where its progress reports
// go. The worker's context answers callctx.Key with it.
type runningCall interface {
	CallInfo() CallInfo
	ProgressReporter
}
