package toolpool

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// The types a program needs to define tools and dispatch calls, so that a
// program can run a pool through this package alone. Each is the type of
// the package that owns it (an alias, not a copy).
type (
	// Tool is a tool's definition: name, description, input schema,
	// timeout, retry policy, idempotence, handler, and what the
	// orchestrators apply before a call runs: its cost, result cache and
	// approval rule (tools.Tool).
	Tool = tools.Tool
	// CachePolicy is Tool.Cache: how long, and with whom, a tool's
	// successful results are shared (tools.CachePolicy). Only an
	// idempotent or read-only tool may have one.
	CachePolicy = tools.CachePolicy
	// ApprovalRule is Tool.Approval: which of a tool's calls wait for a
	// person's approval, and for how long (tools.ApprovalRule).
	ApprovalRule = tools.ApprovalRule
	// ApprovalMatch is one condition of an ApprovalRule: a field of the
	// input and a glob (tools.ApprovalMatch).
	ApprovalMatch = tools.ApprovalMatch
	// Handler executes one call of a tool (tools.Handler). Its error is
	// classified for the retry decision and the model's words: wrap it
	// with Transient, Permanent or RetryAfter, or return it as it is.
	Handler = tools.Handler
	// Output is what a handler returns (tools.Output).
	Output = tools.Output
	// Registry holds the tools a Server serves (tools.Registry).
	Registry = tools.Registry
	// ToolDefinition is a tool as a model sees it, in the Anthropic tools
	// format: name, description, input schema (tools.Definition).
	ToolDefinition = tools.Definition
	// ToolUse is one tool call a model asked for: an Anthropic tool_use
	// block (envelope.ToolUseBlock).
	ToolUse = envelope.ToolUseBlock
	// Result is the answer to one call: content, is_error, class and code
	// (envelope.Result).
	Result = envelope.Result
)

// The scopes of CachePolicy.Scope: CacheScopeTenant (the default, also for
// "") shares a cached result within the tenant whose call produced it;
// CacheScopeGlobal shares it with every tenant.
const (
	CacheScopeTenant = tools.CacheScopeTenant
	CacheScopeGlobal = tools.CacheScopeGlobal
)

// NewRegistry returns an empty Registry with the default JSON Schema
// engine.
func NewRegistry() *Registry { return tools.NewRegistry() }

// Text is the Output of a handler that answers with text.
func Text(s string) Output { return tools.Text(s) }

// Transient marks err as transient: the call is retried after a jittered
// exponential backoff, and dead-lettered when its attempts run out.
func Transient(err error) error { return classify.Transient(err) }

// Permanent marks err as permanent: never retried, answered as is_error.
func Permanent(err error) error { return classify.Permanent(err) }

// RetryAfter marks err as transient with a server-given delay (an HTTP
// 429 or 503 Retry-After): the next attempt waits at least d.
func RetryAfter(err error, d time.Duration) error { return classify.RetryAfter(err, d) }

// ErrUnavailable is matched (errors.Is) by the errors of turns the pool
// could not take: JetStream did not store the calls in time, or the
// Orchestrator is stopped. pkg/client's errors match it too.
var ErrUnavailable = pooltype.ErrUnavailable

// ErrSaturated is matched (errors.Is) by the error of a turn the pool
// refused because it is saturated (OrchestratorConfig.MaxCallsInFlight,
// MaxQueueDepth): nothing of it ran. Such errors match ErrUnavailable too.
var ErrSaturated = pooltype.ErrSaturated

// ErrConnClosed is the cause a process gives when its NATS connection
// closed for good (a protocol error, refused credentials: reconnects
// never give up otherwise). A process in that state is a zombie; the
// binaries exit non-zero so that a supervisor starts a fresh one.
var ErrConnClosed = pooltype.ErrConnClosed

// StreamsConfig configures the streams Provision makes: replicas (1 on one
// server, 3 on a cluster), storage, message size and limits (see
// jetstream.Config; zero fields take its defaults).
type StreamsConfig = jetstream.Config

// Provision creates the pool's streams on the server nc is connected to, or
// updates them to cfg. Run it once before Servers and Orchestrators start
// (it is idempotent: `orchestrator serve` runs it at each start). Bounded
// by ctx, or by StartTimeoutDefault when ctx has no deadline.
func Provision(ctx context.Context, nc *nats.Conn, cfg StreamsConfig) error {
	j, err := js.New(nc)
	if err != nil {
		return fmt.Errorf("toolpool: JetStream context: %w", err)
	}
	ctx, cancel := startContext(ctx)
	defer cancel()
	return jetstream.Provision(ctx, j, cfg)
}

// startContext bounds ctx by StartTimeoutDefault when it has no deadline.
func startContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, StartTimeoutDefault)
}
