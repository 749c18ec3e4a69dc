package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/toolpool/toolpool/internal/worker/mcpback"
	"github.com/toolpool/toolpool/pkg/tools"
)

// MCPConfig is the settings of an mcp entry: a stdio server (Command) or a
// streamable-HTTP server (URL), whose tools are served as the pool's.
type MCPConfig struct {
	// Command is the argv of a stdio server, run with no shell and kept
	// running; Command[0] is resolved to an absolute path at load time.
	Command []string
	// Env is the stdio server's environment as the file writes it, with
	// ${ENV} references unresolved: safe to print. The server also gets
	// the worker's PATH and HOME unless Env sets them.
	Env map[string]string
	// Dir is the stdio server's working directory; empty means the
	// worker's.
	Dir string
	// URL is the endpoint of a streamable-HTTP server.
	URL string
	// Headers are sent with every request to URL, as the file writes them
	// (${ENV} references unresolved).
	Headers map[string]string
	// Tools are the server's tools to serve, by the server's names; empty
	// means all.
	Tools []string
	// Prefix is put before each tool's name in the pool.
	Prefix string
	// Sessions is how many connections (stdio: processes) each worker
	// keeps to the server. Default mcpback.SessionsDefault.
	Sessions int

	idempotent *bool       // the entry's idempotent, when given
	env        []string    // the server's environment, resolved
	resolved   http.Header // Headers with ${ENV} references resolved
	secrets    []string    // the resolved values of ${ENV} references
}

// MCPBackend is the configuration of the mcpback.Backend that serves e,
// an mcp entry: its server, and the entry's timeout, retry policy,
// concurrency, idempotency, pause_on_rate_limit_above, fairness, per_key,
// cost, cache and approval for every tool of the server (cache for those
// that are idempotent or read-only). The caller adds Logger, Metrics and OnChange.
func (e *Entry) MCPBackend() (mcpback.Config, error) {
	m := e.MCP
	if e.Backend != BackendMCP || m == nil {
		return mcpback.Config{}, fmt.Errorf("catalog: tool %q is not an mcp entry", e.Name)
	}
	return mcpback.Config{
		Name:    e.Name,
		Command: slices.Clone(m.Command), Env: slices.Clone(m.env), Dir: m.Dir,
		URL: m.URL, Header: m.resolved.Clone(), Secrets: slices.Clone(m.secrets),
		Tools: slices.Clone(m.Tools), Prefix: m.Prefix, Sessions: m.Sessions,
		Template: tools.Tool{
			Timeout: e.Timeout, Retry: e.Retry, Concurrency: e.Concurrency, PauseOn429Above: e.PauseOn429Above,
			Hints: e.Hints, Fairness: e.Fairness, PerKey: e.PerKey,
			Cost: e.Cost, Cache: e.Cache, Approval: e.Approval,
		},
		Idempotent: m.idempotent,
	}, nil
}

// MCPEntries are the file's mcp entries, in file order.
func (f *File) MCPEntries() []*Entry {
	var out []*Entry
	for i := range f.Entries {
		if f.Entries[i].Backend == BackendMCP {
			out = append(out, &f.Entries[i])
		}
	}
	return out
}

// MCPOptions adjust StartMCP.
type MCPOptions struct {
	// Logger receives the servers' logs. Default slog.Default().
	Logger *slog.Logger
	// Metrics counts the servers' sessions. Default: none.
	Metrics mcpback.Metrics
	// OnChange hears of a server whose tools changed (list_changed), with
	// the tools it serves.
	OnChange func(server string, ts []tools.Tool)
}

// StartMCP starts the servers of the file's mcp entries and registers
// their tools in reg (see mcpback.Set.Start): a server that does not start
// is logged, left out and retried in the background; Set.Follow hands the
// tools of a server that changed or came up late to the worker. A tool reg refuses (a name already taken) is an
// *Error naming the entry. Stop the returned Set (never nil on success)
// when the worker stops.
func (f *File) StartMCP(ctx context.Context, reg *tools.Registry, opts MCPOptions) (*mcpback.Set, error) {
	entries := f.MCPEntries()
	cfgs := make([]mcpback.Config, len(entries))
	for i, e := range entries {
		cfg, err := e.MCPBackend()
		if err != nil {
			return nil, err
		}
		cfg.Logger, cfg.Metrics = opts.Logger, opts.Metrics
		if opts.OnChange != nil {
			name := e.Name
			cfg.OnChange = func(ts []tools.Tool) { opts.OnChange(name, ts) }
		}
		cfgs[i] = cfg
	}
	set, err := mcpback.NewSet(cfgs)
	if err != nil {
		return nil, err
	}
	if err := set.Start(ctx, reg); err != nil {
		var re *mcpback.RegisterError
		if errors.As(err, &re) {
			e, _ := f.Entry(re.Server)
			field, msg := registerField(re.Err)
			if field == "name" {
				field = "mcp.prefix"
				msg = "gives a tool of the server a name another tool has (" + msg + "); set or change the prefix"
			}
			return nil, &Error{File: f.Path, Line: e.Line, Tool: e.Name, Field: field, Err: errors.New(msg)}
		}
		return nil, err
	}
	return set, nil
}
