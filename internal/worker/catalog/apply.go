package catalog

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/toolpool/toolpool/pkg/tools"
)

// tool builds the tools.Tool of a webhook or exec entry.
func (e *Entry) tool(opts Options) (tools.Tool, error) {
	t := tools.Tool{
		Name:        e.Name,
		Description: e.Description,
		InputSchema: e.InputSchema,
		Timeout:     e.Timeout,
		Retry:       e.Retry,
		Idempotent:  e.Idempotent,
		Hints:       e.Hints,
		Concurrency: e.Concurrency,
		Fairness:    e.Fairness,
		PerKey:      e.PerKey,
		Cost:        e.Cost,
		Cache:       e.Cache,
		Approval:    e.Approval,

		PauseOn429Above: e.PauseOn429Above,
	}
	switch e.Backend {
	case BackendWebhook:
		t.Handler = newWebhook(e, opts.HTTPClient(e)).call
	case BackendExec:
		t.Handler = newCommand(e, opts.LookupEnv).run
	default:
		return tools.Tool{}, fmt.Errorf("backend %s has no handler of its own", e.Backend)
	}
	return t, nil
}

// overlay lays e's settings over a built-in tool: only the settings the
// file gives replace the built-in's.
func (e *Entry) overlay(t tools.Tool) tools.Tool {
	if e.Description != "" {
		t.Description = e.Description
	}
	if e.Timeout > 0 {
		t.Timeout = e.Timeout
	}
	if e.Concurrency > 0 {
		t.Concurrency = e.Concurrency
	}
	if e.PauseOn429Above > 0 {
		t.PauseOn429Above = e.PauseOn429Above
	}
	if e.Fairness != "" {
		t.Fairness = e.Fairness
	}
	if !e.PerKey.IsZero() {
		t.PerKey = e.PerKey
	}
	if e.Cost > 0 {
		t.Cost = e.Cost
	}
	if e.Cache != nil {
		t.Cache = e.Cache
	}
	if e.Approval != nil {
		t.Approval = e.Approval
	}
	t.Hints = overlayHints(t.Hints, e.Hints)
	r := e.Retry
	if r.MaxAttempts > 0 {
		t.Retry.MaxAttempts = r.MaxAttempts
	}
	if r.BaseDelay > 0 {
		t.Retry.BaseDelay = r.BaseDelay
	}
	if r.MaxDelay > 0 {
		t.Retry.MaxDelay = r.MaxDelay
	}
	if r.Jitter > 0 {
		t.Retry.Jitter = r.Jitter
	}
	return t
}

// Tools returns the file's tools, in file order, ready to register: webhook
// and exec tools built from their settings (mcp entries are left out: their
// tools are known once their servers run, see StartMCP), and for each builtin entry the
// tool of that name in builtins with the file's settings laid over it. A
// builtin entry naming a tool builtins does not hold is an *Error.
//
// builtins are the built-in tools the caller can serve, by name; it may be
// nil when the file has no builtin entries.
func (f *File) Tools(builtins map[string]tools.Tool) ([]tools.Tool, error) {
	opts := f.opts.withDefaults()
	out := make([]tools.Tool, 0, len(f.Entries))
	for i := range f.Entries {
		e := &f.Entries[i]
		if e.Backend == BackendMCP {
			continue // its tools are the server's: StartMCP
		}
		if e.Backend == BackendBuiltin {
			t, ok := builtins[e.Name]
			if !ok {
				return nil, &Error{File: f.Path, Line: e.Line, Tool: e.Name, Field: "name",
					Err: fmt.Errorf("there is no built-in tool by this name%s", builtinList(builtins))}
			}
			t = e.overlay(t)
			if field, err := overlayRetryError(e, t); err != nil {
				return nil, &Error{File: f.Path, Line: e.Line, Tool: e.Name, Field: field, Err: err}
			}
			if e.Cache != nil && !tools.Cacheable(t.Idempotent, t.Hints) {
				return nil, &Error{File: f.Path, Line: e.cacheLine, Tool: e.Name, Field: "cache",
					Err: fmt.Errorf("%w; the built-in tool is neither (give hints: {read_only: true} only if it changes nothing)", errNotCacheable)}
			}
			out = append(out, t)
			continue
		}
		t, err := e.tool(opts)
		if err != nil {
			return nil, &Error{File: f.Path, Line: e.Line, Tool: e.Name, Field: "backend", Err: err}
		}
		out = append(out, t)
	}
	return out, nil
}

// overlayRetryError checks a built-in tool's retry policy once the file's
// settings are laid over it, naming the setting of the file that does not
// fit the built-in's own.
func overlayRetryError(e *Entry, t tools.Tool) (string, error) {
	p := t.Retry.WithDefaults()
	if p.MaxDelay >= p.BaseDelay {
		return "", nil
	}
	if e.Retry.MaxDelay > 0 {
		return "retry.max_delay", fmt.Errorf("must be at least base_delay (%s, the built-in tool's)", p.BaseDelay)
	}
	return "retry.base_delay", fmt.Errorf("must be at most max_delay (%s, the built-in tool's); set retry.max_delay too", p.MaxDelay)
}

func builtinList(builtins map[string]tools.Tool) string {
	if len(builtins) == 0 {
		return " (this process serves no built-in tools)"
	}
	return " (built-in tools: " + strings.Join(slices.Sorted(maps.Keys(builtins)), ", ") + ")"
}

// Apply registers the file's tools (see Tools) in reg. An error names the
// file, the tool and the field: a duplicate name, or a builtin entry whose
// settings do not fit the built-in tool (retry.base_delay above its
// max_delay, say).
func (f *File) Apply(reg *tools.Registry, builtins map[string]tools.Tool) error {
	ts, err := f.Tools(builtins)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if err := reg.Register(t); err != nil {
			field, msg := registerField(err)
			e, _ := f.Entry(t.Name)
			return &Error{File: f.Path, Line: e.Line, Tool: t.Name, Field: field, Err: fmt.Errorf("%s", msg)}
		}
	}
	return nil
}

// overlayHints lays the hints a file gives over a built-in tool's own.
func overlayHints(h, file tools.Hints) tools.Hints {
	h.ReadOnly = cmp.Or(file.ReadOnly, h.ReadOnly)
	h.Destructive = cmp.Or(file.Destructive, h.Destructive)
	h.OpenWorld = cmp.Or(file.OpenWorld, h.OpenWorld)
	return h
}
