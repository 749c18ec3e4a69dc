package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Defaults of Config.
const (
	// MaxBodyBytesDefault caps a request body; a larger one is answered 413.
	MaxBodyBytesDefault = 4 << 20
	// DefaultTimeoutDefault is how long POST /v1/tool_calls waits for the
	// results when the request names no timeout.
	DefaultTimeoutDefault = 60 * time.Second
	// MaxTimeoutDefault caps the timeout a request may ask for; a larger one
	// is lowered to it.
	MaxTimeoutDefault = 10 * time.Minute
	// MaxCallsDefault caps the tool calls of one request.
	MaxCallsDefault = 512
	// RetryAfterDefault is the Retry-After of a 503 answer.
	RetryAfterDefault = 2 * time.Second
	// WriteTimeoutDefault bounds the writing of an answer once it is ready
	// (and every answer of a Server that is not a tool call's).
	WriteTimeoutDefault = 30 * time.Second
	// MaxSessionBytes caps a session id (the rules of MaxIDBytes apply).
	MaxSessionBytes = MaxIDBytes
)

// Dispatcher runs the tool calls of one assistant turn and returns one
// result per call, in the calls' order. *dispatch.Dispatcher implements it.
// An error wrapping dispatch.ErrUnavailable is answered 503.
type Dispatcher interface {
	Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error)
}

// DefinitionSource lists the tools the pool serves right now, for
// GET /v1/tools. An error is answered 503.
type DefinitionSource interface {
	Definitions(ctx context.Context) ([]tools.Definition, error)
}

// DefinitionsFunc adapts a function to a DefinitionSource.
type DefinitionsFunc func(ctx context.Context) ([]tools.Definition, error)

// Definitions calls f.
func (f DefinitionsFunc) Definitions(ctx context.Context) ([]tools.Definition, error) { return f(ctx) }

// RegistryDefinitions is the DefinitionSource of the tools registered in
// reg: the in-process setup, where the pool serves exactly those tools.
func RegistryDefinitions(reg *tools.Registry) DefinitionSource {
	return DefinitionsFunc(func(context.Context) ([]tools.Definition, error) { return reg.Definitions(), nil })
}

// Config configures a Handler. Zero fields take their defaults.
type Config struct {
	// Dispatcher runs the tool calls. Required.
	Dispatcher Dispatcher
	// Definitions lists the tools for GET /v1/tools. Required.
	Definitions DefinitionSource
	// Logger receives one debug record per request and warnings for
	// failures. Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes caps a request body. Default MaxBodyBytesDefault.
	MaxBodyBytes int64
	// DefaultTimeout is the wait for results when a request names none.
	// Default DefaultTimeoutDefault.
	DefaultTimeout time.Duration
	// MaxTimeout caps the wait a request may ask for. Default
	// MaxTimeoutDefault.
	MaxTimeout time.Duration
	// MaxCalls caps the tool calls of one request. Default MaxCallsDefault.
	MaxCalls int
	// RetryAfter is sent, rounded up to whole seconds, with 503 answers.
	// Default RetryAfterDefault.
	RetryAfter time.Duration
	// Keys, when it holds keys, makes every request need one
	// (Authorization: Bearer <key>): the key's tenant goes with the calls
	// (dispatch.WithTenant), with its weight and priority (see
	// HeaderPriority), and a key with a tool list calls and lists those
	// tools only. Default: no keys, every request is let in.
	Keys *apikey.Set
	// WriteTimeout bounds the writing of an answer once the results are
	// in. Default WriteTimeoutDefault.
	WriteTimeout time.Duration
	// Metrics counts refusals and tool calls by tenant. Default NopMetrics.
	Metrics Metrics
	// Tasks keeps async calls (Prefer: respond-async, GET and DELETE
	// /v1/tool_calls/{id}). Default nil: the preference is ignored (the
	// calls are answered synchronously) and /v1/tool_calls/{id} is 404.
	Tasks TaskStore
	// Tracer, when on, makes every request a server span, the parent of
	// its calls' spans (trace.go). Default nil: off.
	Tracer *tracing.Tracer
}

// Metrics receives the HTTP front door's counts. Implementations must be
// safe for concurrent use and must not block. Tenants come from the API
// keys, so their number is bounded.
type Metrics interface {
	// Refused counts a request refused before it reached a tool: reason is
	// one of the Refused… values.
	Refused(reason string)
	// ToolCalls counts n tool calls of one request of tenant ("" without
	// API keys) by outcome, one of the Outcome… values.
	ToolCalls(tenant, outcome string, n int)
}

// The reasons of Metrics.Refused.
const (
	RefusedUnauthorized = "unauthorized" // no API key, or a wrong one
	RefusedContentType  = "content_type" // a body that is not application/json
	RefusedHost         = "host"         // a Host the server does not serve (DNS rebinding)
	RefusedOrigin       = "origin"       // a browser's cross-origin request
	RefusedBusy         = "busy"         // Server.MaxRequests reached
	RefusedConnections  = "connections"  // Server.MaxConns reached: the connection was closed
	RefusedDraining     = "draining"     // the server is shutting down
	RefusedTooLarge     = "too_large"    // a declared body over Server.MaxBodyBytes: 413 before reading it
)

// The outcomes of Metrics.ToolCalls.
const (
	OutcomeDispatched = "dispatched"  // sent to the dispatcher
	OutcomeNotAllowed = "not_allowed" // a tool the API key may not call
	OutcomeSaturated  = "saturated"   // refused by admission control (429)
)

// NopMetrics is a Metrics that records nothing.
type NopMetrics struct{}

// Refused does nothing.
func (NopMetrics) Refused(string) {}

// ToolCalls does nothing.
func (NopMetrics) ToolCalls(string, string, int) {}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, MaxBodyBytesDefault)
	c.DefaultTimeout = cmp.Or(c.DefaultTimeout, DefaultTimeoutDefault)
	c.MaxTimeout = cmp.Or(c.MaxTimeout, MaxTimeoutDefault)
	c.MaxCalls = cmp.Or(c.MaxCalls, MaxCallsDefault)
	c.RetryAfter = cmp.Or(c.RetryAfter, RetryAfterDefault)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, WriteTimeoutDefault)
	if c.Metrics == nil {
		c.Metrics = NopMetrics{}
	}
	return c
}

// Validate names the first bad field. It expects defaults to be applied.
func (c Config) Validate() error {
	switch {
	case c.Dispatcher == nil:
		return errors.New("httpapi: Config.Dispatcher is required")
	case c.Definitions == nil:
		return errors.New("httpapi: Config.Definitions is required")
	case c.Logger == nil:
		return errors.New("httpapi: Config.Logger is nil")
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("httpapi: Config.MaxBodyBytes must be positive, got %d", c.MaxBodyBytes)
	case c.DefaultTimeout <= 0:
		return fmt.Errorf("httpapi: Config.DefaultTimeout must be positive, got %v", c.DefaultTimeout)
	case c.MaxTimeout <= 0:
		return fmt.Errorf("httpapi: Config.MaxTimeout must be positive, got %v", c.MaxTimeout)
	case c.DefaultTimeout > c.MaxTimeout:
		return fmt.Errorf("httpapi: Config.DefaultTimeout %v is over Config.MaxTimeout %v", c.DefaultTimeout, c.MaxTimeout)
	case c.MaxCalls <= 0:
		return fmt.Errorf("httpapi: Config.MaxCalls must be positive, got %d", c.MaxCalls)
	case c.RetryAfter <= 0:
		return fmt.Errorf("httpapi: Config.RetryAfter must be positive, got %v", c.RetryAfter)
	case c.WriteTimeout <= 0:
		return fmt.Errorf("httpapi: Config.WriteTimeout must be positive, got %v", c.WriteTimeout)
	case c.Metrics == nil:
		return errors.New("httpapi: Config.Metrics is nil")
	}
	return nil
}
