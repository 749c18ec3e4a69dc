package tools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Defaults for a tool's settings.
const (
	TimeoutDefault     = 30 * time.Second
	ConcurrencyDefault = 1000 // fleet-wide cap on calls in flight (MaxAckPending)
)

// Output is what a handler returns on success.
type Output struct {
	Content envelope.Content
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
	Concurrency int // fleet-wide cap on calls in flight. Default ConcurrencyDefault.
	Handler     Handler
	// PauseOn429Above, when positive, pauses the tool for the whole fleet
	// (its consumer, on the server) when its downstream answers HTTP 429
	// with a Retry-After above this: no worker takes its calls until the
	// Retry-After (capped at Retry.MaxDelay) has passed. Default 0: never.
	// Set it only for a tool that talks to one downstream: a rate limit of
	// one site should not stop a tool that fetches any URL.
	PauseOn429Above time.Duration
}

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
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// CallInfo describes the call a handler is executing; see CallInfoFrom.
type CallInfo struct {
	ID string
	// Key is the call's identity (envelope.CallKey): the same key is the
	// same call, whichever delivery or re-post runs it.
	Key      string
	Tool     string
	Tenant   string
	Session  string
	Attempt  int // 1-based
	Deadline time.Time
	WorkerID string
	// Traceparent is the call's W3C trace context, to send on outgoing requests.
	Traceparent string
}

type callInfoKey struct{}

// WithCallInfo returns ctx carrying ci.
func WithCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}

// CallInfoFrom returns the CallInfo the worker put in ctx.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return ci, ok
}
