package mcpfront

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Defaults of Config.
const (
	// MaxBodyBytesDefault caps one HTTP request body (and one stdio line):
	// that of the HTTP API (httpapi.MaxBodyBytesDefault, 4 MiB).
	MaxBodyBytesDefault = 4 << 20
	// NameDefault is the server name hosts see (serverInfo.name).
	NameDefault = "toolpool"
	// SessionTimeoutDefault ends the process state of an HTTP session
	// (revisions before 2026-07-28) that sent no request for that long (a
	// client that went away without DELETE). Its client goes on: its
	// signed session id is served statelessly from then on (replicas.go).
	SessionTimeoutDefault = 10 * time.Minute
	// MaxSessionsDefault caps the HTTP sessions one process holds (about
	// 10 KiB and 2 goroutines each; see docs/mcp.md). A session opened
	// over the cap is served statelessly, as on a replica that does not
	// hold it.
	MaxSessionsDefault = 1024
	// MaxCallsDefault caps the messages of one JSON-RPC batch: the HTTP
	// API's cap on the tool calls of one request (httpapi.MaxCallsDefault).
	MaxCallsDefault = 512
)

// Dispatcher runs the tool calls of one turn (Orchestrator.Dispatch,
// dispatch.Dispatcher.Dispatch): one result per call, in order. The ctx
// carries the tenant, the progress function and the cancellation.
type Dispatcher interface {
	Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error)
}

// Tool is a live tool as the MCP server lists it.
type Tool struct {
	tools.Definition
	// Idempotent: calling the tool twice with the same input has no more
	// effect than once (tools.Tool's Idempotent): idempotentHint.
	Idempotent bool
	// Hints are the tool's other annotations, where known.
	Hints tools.Hints
}

// ToolSource lists the tools the pool serves right now, sorted by name.
type ToolSource func(ctx context.Context) []Tool

// Subscribe returns a channel that gets a value when the live tools change
// (and is closed when no more changes will come), and a function that ends
// the subscription; discovery.Catalog.Subscribe is one.
type Subscribe func() (changes <-chan struct{}, cancel func())

// Config configures a Server. Zero fields take the documented defaults.
type Config struct {
	// Dispatcher runs the calls. Required.
	Dispatcher Dispatcher
	// Tools lists the live tools. Required.
	Tools ToolSource
	// Subscribe, when set, tells of changes to the live tools: the server
	// then updates its list and sends notifications/tools/list_changed to
	// the connected clients at once. The list is also read again at each
	// tools/list, with or without it.
	Subscribe Subscribe
	// Token, when set, is the bearer token /mcp requires
	// (Authorization: Bearer <Token>). See Keys for how the two combine.
	Token string
	// Keys, when it holds keys, lets the HTTP API's keys in on /mcp too:
	// a request with a key calls under the key's tenant and sees and calls
	// only the key's tools. With Token or Keys set, a request needs one of
	// them; with neither, /mcp is open (loopback only, or behind a proxy
	// that authenticates: the binary enforces that).
	Keys *apikey.Set
	// Closed, when not empty, makes Handler refuse every request (403)
	// with this text: /mcp is mounted but not exposed, e.g. on an address
	// without authentication. Stdio is not affected.
	Closed string
	// MaxBodyBytes caps an HTTP request body and a stdio message. Default
	// MaxBodyBytesDefault.
	MaxBodyBytes int64
	// SessionTimeout ends the process state of HTTP sessions idle that
	// long. Default SessionTimeoutDefault.
	SessionTimeout time.Duration
	// MaxSessions caps the HTTP sessions this process holds. Default
	// MaxSessionsDefault; negative: none (every session of an older
	// revision is served statelessly).
	MaxSessions int
	// SessionKey signs the session ids of older revisions, so that any
	// replica serves a session another opened: replicas behind one load
	// balancer need the same key (at least SessionKeyBytes bytes). Empty:
	// a random key of this process (its sessions are unknown elsewhere).
	SessionKey []byte
	// LoadSessionKey, when set, is called by Start for the key the fleet
	// shares (e.g. from a JetStream KV entry); it replaces SessionKey. On
	// an error (or a key shorter than SessionKeyBytes) a warning is logged
	// and SessionKey stays: this process's sessions are then unknown to
	// other replicas.
	LoadSessionKey func(context.Context) ([]byte, error)
	// MaxCalls caps the messages of one JSON-RPC batch (revision
	// 2025-03-26): a batch over it is refused whole and nothing of it
	// runs. Default MaxCallsDefault.
	MaxCalls int
	// Name and Version are the server's serverInfo. Default NameDefault
	// and the binary's build version (discovery.BuildVersion).
	Name, Version string
	// Tasks, when set, is the fleet's task store, where MCP tasks are
	// kept (tasks.go): a tools/call a client asks a task for is answered
	// with the task at once, and tasks/get, tasks/cancel (and
	// tasks/result, 2025-11-25) read it from there, on any replica. Nil
	// (not a nil pointer in the interface): no tasks (tasks/ methods are
	// "method not found").
	Tasks FleetStore
	// HostApprovals, when set, lets a 2026-07-28 host that declares the
	// elicitation capability decide the approval a call of its waits for
	// (approve.go, docs/mcp.md "Approvals"): the call is answered
	// input_required and the decision comes with the host's retry. Nil:
	// hosts are not asked; a held call waits for a decision made
	// elsewhere (CLI, console).
	HostApprovals HostApprovals
	// ApprovalURL, with HostApprovals, is the URL of the console's
	// approvals page as people reach it (https://pool.example/ui/approvals):
	// a host that declares URL-mode elicitation is sent to
	// ApprovalURL/<approval id> instead of a form. Empty: forms only.
	ApprovalURL string
	// Tracer, when on, makes every tools/call a server span, the parent
	// of its call's span (trace.go). Default nil: off.
	Tracer *tracing.Tracer
	// Logger receives warnings. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, MaxBodyBytesDefault)
	c.Name = cmp.Or(c.Name, NameDefault)
	c.Version = cmp.Or(c.Version, discovery.BuildVersion())
	c.SessionTimeout = cmp.Or(c.SessionTimeout, SessionTimeoutDefault)
	c.MaxSessions = cmp.Or(c.MaxSessions, MaxSessionsDefault)
	c.MaxCalls = cmp.Or(c.MaxCalls, MaxCallsDefault)
	if len(c.SessionKey) == 0 {
		c.SessionKey = []byte(rand.Text() + rand.Text())
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Dispatcher == nil:
		return errors.New("mcpfront: Config.Dispatcher is required")
	case c.Tools == nil:
		return errors.New("mcpfront: Config.Tools is required")
	case c.SessionTimeout < 0:
		return fmt.Errorf("mcpfront: Config.SessionTimeout must not be negative, got %v", c.SessionTimeout)
	case c.MaxCalls <= 0:
		return fmt.Errorf("mcpfront: Config.MaxCalls must be positive, got %d", c.MaxCalls)
	case len(c.SessionKey) < SessionKeyBytes:
		return fmt.Errorf("mcpfront: Config.SessionKey is %d bytes; it needs at least %d", len(c.SessionKey), SessionKeyBytes)
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("mcpfront: Config.MaxBodyBytes must be positive, got %d", c.MaxBodyBytes)
	case c.ApprovalURL != "" && !absoluteHTTP(c.ApprovalURL):
		return fmt.Errorf("mcpfront: Config.ApprovalURL %q: want the absolute http(s) URL of the console's approvals page", c.ApprovalURL)
	case c.Token != "" && len(c.Token) < apikey.MinBytes:
		return fmt.Errorf("mcpfront: Config.Token is %d characters; a bearer token needs at least %d (e.g. openssl rand -hex 32)", len(c.Token), apikey.MinBytes)
	}
	return nil
}

// absoluteHTTP reports whether s is an absolute http or https URL with a
// host, without a query or fragment.
func absoluteHTTP(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.RawQuery == "" && u.Fragment == ""
}
