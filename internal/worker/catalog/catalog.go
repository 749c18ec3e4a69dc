package catalog

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Backend is how a catalog tool runs.
type Backend string

// The backends.
const (
	// BackendWebhook POSTs the call's input to a URL.
	BackendWebhook Backend = "webhook"
	// BackendExec runs a command with the call's input on its stdin.
	BackendExec Backend = "exec"
	// BackendBuiltin serves a tool compiled into the binary, with the
	// catalog's settings laid over its own.
	BackendBuiltin Backend = "builtin"
	// BackendMCP serves the tools of an MCP server (stdio or streamable
	// HTTP): one entry, many tools.
	BackendMCP Backend = "mcp"
)

// Defaults of the backends' settings.
const (
	// MaxOutputBytesDefault caps the content a webhook or command returns:
	// the rest is cut with a note telling the model so.
	MaxOutputBytesDefault = 256 << 10
	// TermGraceDefault is how long a command's process group has between
	// SIGTERM and SIGKILL once the attempt's time is up.
	TermGraceDefault = time.Second
	// PathDefault is the PATH a command runs with unless PATH is in its
	// env allow-list.
	PathDefault = "/usr/local/bin:/usr/bin:/bin"
	// StderrTailBytes is how much of the end of a failed command's stderr
	// the model is shown.
	StderrTailBytes = 1 << 10
	// ExitTempFail is the exit status (EX_TEMPFAIL) by which a command says
	// its failure is temporary: the call is retried.
	ExitTempFail = 75
)

// File is a loaded, checked catalog file.
type File struct {
	// Path is the file's path as given to Load (or the name given to
	// Parse); errors name the file by it.
	Path string
	// Entries are the file's tools, in file order.
	Entries []Entry

	opts Options
}

// Entry is one tool of a catalog file. Settings the file leaves out are
// zero; for a builtin entry only the settings the file gives override the
// built-in tool's own.
type Entry struct {
	Name        string
	Line        int // where the entry starts in the file
	Description string
	// InputSchema is the JSON Schema of the tool's input (nil for builtin).
	InputSchema json.RawMessage
	// Timeout is the per-attempt timeout; 0 when not set.
	Timeout time.Duration
	// Retry holds the retry settings the file gives; zero fields are not
	// set (and take classify's defaults, or the built-in tool's).
	Retry classify.Policy
	// Idempotent says the tool is safe to execute twice.
	Idempotent bool
	// Hints say what the tool does to the world (hints: read_only,
	// destructive, open_world), for MCP hosts; unset ones are not known.
	// For an mcp entry they override the server's.
	Hints tools.Hints
	// Concurrency is the fleet-wide cap on calls in flight; 0 when not set.
	Concurrency int
	Backend     Backend
	Webhook     *WebhookConfig // set for BackendWebhook
	Exec        *ExecConfig    // set for BackendExec
	MCP         *MCPConfig     // set for BackendMCP

	// PauseOn429Above pauses the tool fleet-wide when its downstream
	// answers 429 with a longer Retry-After (tools.Tool.PauseOn429Above);
	// 0 when not set.
	PauseOn429Above time.Duration

	// Fairness is the key the tool's free slots are shared between
	// (tools.Tool.Fairness: tenant, session or input.<field>); "" when
	// not set.
	Fairness string
	// PerKey are the limits of each fairness key (tools.Tool.PerKey:
	// per_key's concurrency, rate, per and burst), as the file gives
	// them; zero fields are not set.
	PerKey tools.KeyLimits

	// Cost is what one call spends of a budget counted in cost units
	// (tools.Tool.Cost); 0 when not set (1).
	Cost int
	// Cache is the tool's result cache (tools.Tool.Cache: cache's ttl and
	// scope); nil when not set.
	Cache *tools.CachePolicy
	// Approval is the tool's approval rule (tools.Tool.Approval: approval:
	// always, or its when and timeout); nil when not set.
	Approval *tools.ApprovalRule

	cacheLine int // the line of cache, for the checks Tools makes
}

// WebhookConfig is the settings of a webhook tool.
type WebhookConfig struct {
	// URL receives a POST with the call's input as its JSON body.
	URL string
	// Headers are the request headers as the file writes them, with their
	// ${ENV} references unresolved: safe to print.
	Headers map[string]string
	// MaxOutputBytes caps the content taken from a 2xx body.
	MaxOutputBytes int

	resolved http.Header // Headers with ${ENV} references resolved
	secrets  []string    // the resolved values of ${ENV} references
}

// ExecConfig is the settings of an exec tool.
type ExecConfig struct {
	// Command is the argv run with no shell; Command[0] is resolved to an
	// absolute path at load time.
	Command []string
	// Env lists the environment variables passed through from the worker's
	// environment; nothing else is, except PATH (PathDefault unless PATH is
	// listed).
	Env []string
	// Dir is the working directory; empty means the worker's.
	Dir string
	// TermGrace is how long the process group has between SIGTERM and
	// SIGKILL when the attempt's time is up.
	TermGrace time.Duration
	// MaxOutputBytes caps the content taken from stdout.
	MaxOutputBytes int
}

// Options adjust Load and Parse.
type Options struct {
	// LookupEnv resolves ${NAME} references in webhook header values.
	// Default os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// LookPath finds an exec command given by a bare name. Default
	// exec.LookPath (the worker's PATH).
	LookPath func(file string) (string, error)
	// HTTPClient returns the client a webhook tool sends its requests
	// with, given the tool's entry. Default: a client that refuses private,
	// loopback and link-local addresses except the webhook's own host (which
	// is trusted configuration) and follows no redirects.
	HTTPClient func(e *Entry) *http.Client
}

func (o Options) withDefaults() Options {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.LookPath == nil {
		o.LookPath = lookPath
	}
	if o.HTTPClient == nil {
		o.HTTPClient = defaultHTTPClient
	}
	return o
}

// Error is a problem in a catalog file. It reads
//
//	tools.yaml:12: tool "weather": retry.max_attempts: must be between 1 and 100
//
// naming the file, the line when known, the tool when known and the field.
type Error struct {
	File  string
	Line  int    // 0 when unknown
	Tool  string // the tool's name, or "#N" (1-based) for a tool without one; "" for the file as a whole
	Field string // e.g. "retry.max_attempts"; "" for the tool or file as a whole
	Err   error
}

// Error implements error.
func (e *Error) Error() string {
	s := e.File
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	if e.Tool != "" {
		if e.Tool[0] == '#' {
			s += ": tool " + e.Tool
		} else {
			s += ": tool " + strconv.Quote(e.Tool)
		}
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Load reads the catalog file at path and checks it: YAML, or JSON when the
// name ends in .json or the content starts with '{'. The first problem found
// is returned as an *Error.
func Load(path string, opts Options) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tool catalog: %w", err)
	}
	return Parse(path, data, opts)
}

// Names returns the names of the file's tools, in file order.
func (f *File) Names() []string {
	names := make([]string, len(f.Entries))
	for i := range f.Entries {
		names[i] = f.Entries[i].Name
	}
	return names
}

// Entry returns the file's tool named name.
func (f *File) Entry(name string) (*Entry, bool) {
	for i := range f.Entries {
		if f.Entries[i].Name == name {
			return &f.Entries[i], true
		}
	}
	return nil, false
}
