package mcpback

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/infra/mcpwire"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Errors of calls, for errors.Is. Classify sees them marked transient or
// permanent.
var (
	// ErrNoSession is a call made while no session to the server is up
	// (it is being restarted): transient.
	ErrNoSession = errors.New("mcpback: no session to the MCP server is up")
	// ErrToolError is a result the server marked isError: permanent, with
	// the server's text as the message for the model.
	ErrToolError = errors.New("mcpback: the MCP server reported a tool error")
	// ErrToolGone is a call of a tool the server no longer lists:
	// permanent.
	ErrToolGone = errors.New("mcpback: the MCP server no longer offers the tool")
)

// remoteTool is one tool of the server as the Backend serves it.
type remoteTool struct {
	remote string // the server's name for it
	tool   tools.Tool
	gone   bool            // the server stopped listing it
	schema json.RawMessage // the schema the tool was registered with
	// check validates input against a schema the server sent after the
	// tool was registered (list_changed); nil while the registered schema
	// is current, since the worker validates against that one.
	check *tools.Registered
}

// list asks cs for the server's tools and makes the pool tools of those
// selected.
func (b *Backend) list(ctx context.Context, cs *mcp.ClientSession) (map[string]*remoteTool, []tools.Tool, error) {
	if cs == nil {
		return nil, nil, ErrNoSession
	}
	var all []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, nil, err
		}
		all = append(all, t)
	}
	remotes := map[string]*remoteTool{}
	var served []tools.Tool
	offered := map[string]bool{}
	for _, mt := range all {
		offered[mt.Name] = true
		if len(b.cfg.Tools) > 0 && !slices.Contains(b.cfg.Tools, mt.Name) {
			continue
		}
		t, err := b.poolTool(mt)
		if err == nil {
			err = tools.NewRegistry().Register(t) // what the worker's registry will check
		}
		if err != nil {
			b.cfg.Logger.Warn("an MCP server's tool cannot be served", "server", b.cfg.Name, "tool", mt.Name, "err", err)
			continue
		}
		if _, dup := remotes[t.Name]; dup {
			b.cfg.Logger.Warn("two tools of an MCP server get the same name in the pool; serving the first", "server", b.cfg.Name, "tool", t.Name)
			continue
		}
		remotes[t.Name] = &remoteTool{remote: mt.Name, tool: t}
		served = append(served, t)
	}
	for _, name := range b.cfg.Tools {
		if !offered[name] {
			b.cfg.Logger.Warn("the catalog selects a tool the MCP server does not offer", "server", b.cfg.Name, "tool", name)
		}
	}
	return remotes, served, nil
}

// poolTool is mt as a tool of the pool.
func (b *Backend) poolTool(mt *mcp.Tool) (tools.Tool, error) {
	schema, err := json.Marshal(mt.InputSchema)
	if err != nil {
		return tools.Tool{}, fmt.Errorf("its input schema: %w", err)
	}
	if mt.InputSchema == nil || bytes.Equal(schema, []byte("null")) {
		schema = []byte(`{"type":"object"}`)
	}
	t := b.cfg.Template
	t.Name = PoolName(b.cfg.Prefix, mt.Name)
	t.Description = cmpOr(strings.TrimSpace(mt.Description), mt.Title, mt.Name)
	t.InputSchema = schema
	switch {
	case b.cfg.Idempotent != nil:
		t.Idempotent = *b.cfg.Idempotent
	case mt.Annotations != nil && (mt.Annotations.ReadOnlyHint || mt.Annotations.IdempotentHint):
		t.Idempotent = true
	}
	if a := mt.Annotations; a != nil {
		// The server's hints, each unless the catalog entry gave it.
		readOnly := a.ReadOnlyHint
		t.Hints.ReadOnly = cmp.Or(t.Hints.ReadOnly, &readOnly)
		t.Hints.Destructive = cmp.Or(t.Hints.Destructive, a.DestructiveHint)
		t.Hints.OpenWorld = cmp.Or(t.Hints.OpenWorld, a.OpenWorldHint)
	}
	if t.Cache != nil && !tools.Cacheable(t.Idempotent, t.Hints) {
		// The entry's cache is for the server's tools that may be served
		// again without running: not this one.
		b.cfg.Logger.Warn("an MCP server's tool is neither idempotent nor read-only: its results are not cached",
			"server", b.cfg.Name, "tool", mt.Name)
		t.Cache = nil
	}
	t.Handler = b.handler(t.Name)
	return t, nil
}

func cmpOr(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// PoolName is the pool's name of the server's tool name with prefix: the
// characters tools.NamePattern does not allow become '_', and the name is
// cut at 64 bytes.
func PoolName(prefix, name string) string {
	n := []byte(prefix + name)
	for i, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			n[i] = '_'
		}
	}
	if len(n) > 64 {
		n = n[:64]
	}
	return string(n)
}

// listChanged asks the refresher to list the tools again: the server
// said they changed.
func (b *Backend) listChanged() {
	select {
	case b.refresh <- struct{}{}:
	default: // a refresh is asked for already
	}
}

// refresher lists the tools again whenever listChanged asks, until life
// ends.
func (b *Backend) refresher(life context.Context) {
	for {
		select {
		case <-life.Done():
			return
		case <-b.refresh:
			b.refreshTools(life)
		}
	}
}

// refreshTools lists the tools again after the server said they changed:
// the tools served get their new descriptions and schemas, the tools
// added are served, and OnChange hears of every tool served.
func (b *Backend) refreshTools(life context.Context) {
	b.listMu.Lock()
	defer b.listMu.Unlock()
	ctx, cancel := context.WithTimeout(life, b.cfg.StartTimeout)
	defer cancel()
	s := b.pick()
	if s == nil {
		return
	}
	remotes, listed, err := b.list(ctx, s.current())
	if err != nil {
		if life.Err() == nil {
			b.cfg.Logger.Warn("listing an MCP server's tools after list_changed failed", "server", b.cfg.Name, "err", b.redactErr(err))
		}
		return
	}
	served, added, removed, updated := b.applyList(remotes, listed)
	if len(added)+len(removed)+len(updated) == 0 {
		return // a server may say so when nothing changed (at connection, say)
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(updated)
	b.cfg.Logger.Info("an MCP server's tools changed", "server", b.cfg.Name,
		"updated", updated, "removed", removed, "added", added)
	if b.cfg.OnChange != nil {
		b.cfg.OnChange(served)
	}
}

// applyList makes the server's new list of tools (remotes by name, listed
// in the server's order) the Backend's, and returns the tools served now
// and the names of those added, removed and updated.
func (b *Backend) applyList(remotes map[string]*remoteTool, listed []tools.Tool) (served []tools.Tool, added, removed, updated []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range listed {
		if _, ok := b.remotes[t.Name]; !ok {
			added = append(added, t.Name)
		}
	}
	for _, cur := range b.remotes {
		nt, ok := remotes[cur.tool.Name]
		if !ok {
			if !cur.gone {
				removed = append(removed, cur.tool.Name)
				cur.gone = true
			}
			continue
		}
		if cur.gone || nt.tool.Description != cur.tool.Description || !bytes.Equal(nt.tool.InputSchema, cur.tool.InputSchema) {
			updated = append(updated, cur.tool.Name)
		}
		nt.schema = cur.registeredSchema()
		if !bytes.Equal(nt.tool.InputSchema, nt.schema) {
			scratch := tools.NewRegistry()
			if err := scratch.Register(nt.tool); err == nil {
				nt.check, _ = scratch.Lookup(nt.tool.Name)
			}
		}
		b.remotes[cur.tool.Name] = nt
	}
	for _, name := range added { // served from now on, as the server lists them
		b.remotes[name] = remotes[name]
		b.order = append(b.order, name)
	}
	served = make([]tools.Tool, 0, len(b.order))
	for _, name := range b.order {
		if rt := b.remotes[name]; !rt.gone {
			served = append(served, rt.tool)
		}
	}
	b.served = served
	return served, added, removed, updated
}

// tellTools tells OnChange of the tools served now (a Set's server that
// came up late), in order with the list refreshes.
func (b *Backend) tellTools() {
	b.listMu.Lock()
	defer b.listMu.Unlock()
	if b.cfg.OnChange != nil && b.Life().Err() == nil {
		b.cfg.OnChange(b.Tools())
	}
}

// registeredSchema is the schema the worker's registry holds for the
// tool: the one it was first served with.
func (rt *remoteTool) registeredSchema() json.RawMessage {
	if rt.schema != nil {
		return rt.schema
	}
	return rt.tool.InputSchema
}

// lookup is the current state of the pool tool name.
func (b *Backend) lookup(name string) *remoteTool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.remotes[name]
}

// handler calls the server's tool behind the pool tool name.
func (b *Backend) handler(name string) tools.Handler {
	return func(ctx context.Context, input json.RawMessage) (tools.Output, error) {
		rt := b.lookup(name)
		if rt == nil || rt.gone {
			return tools.Output{}, classify.Permanent(classify.WithMessage(ErrToolGone, classify.MCPCauseToolGone))
		}
		if rt.check != nil {
			if err := rt.check.Validate(input); err != nil {
				return tools.Output{}, err
			}
		}
		var cs *mcp.ClientSession
		s := b.pick()
		if s != nil {
			cs = s.current() // nil when it died just now
		}
		if cs == nil {
			return tools.Output{}, classify.Transient(classify.WithMessage(ErrNoSession, classify.MCPCauseNotRunning))
		}
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		params := &mcp.CallToolParams{Name: rt.remote, Arguments: input}
		token := b.nextToken()
		b.progress.Store(token, func(p tools.Progress) { tools.ReportProgress(ctx, p) })
		defer b.progress.Delete(token)
		params.SetProgressToken(token)
		if ci, ok := tools.CallInfoFrom(ctx); ok && ci.Traceparent != "" {
			// MCP reserves _meta.traceparent for the W3C trace context
			// (SEP-414): the server's spans join the call's trace.
			if params.Meta == nil {
				params.Meta = mcp.Meta{}
			}
			params.Meta["traceparent"] = ci.Traceparent
		}
		rl := &rateLimit{}
		res, err := cs.CallTool(context.WithValue(ctx, rateLimitKey{}, rl), params)
		switch {
		case ctx.Err() != nil:
			// The SDK has sent notifications/cancelled to the server.
			return tools.Output{}, fmt.Errorf("mcpback: call of %s on server %s ended: %w", rt.remote, b.cfg.Name, ctx.Err())
		case err != nil && rl.get() != nil:
			return tools.Output{}, rl.get() // 429: retried no sooner than its Retry-After
		case err != nil:
			return tools.Output{}, classify.Transient(classify.WithMessage(b.redactErr(err), callFailure(err)))
		case res.IsError:
			text := strings.TrimSpace(mcpwire.ToPool(res.Content).Text())
			if text == "" {
				text = classify.MCPCauseNoText
			}
			return tools.Output{}, classify.Permanent(classify.WithMessage(ErrToolError, text))
		}
		content := mcpwire.ToPool(res.Content)
		if len(content) == 0 && res.StructuredContent != nil {
			if data, err := json.Marshal(res.StructuredContent); err == nil {
				content = envelope.Text(string(data))
			}
		}
		return tools.Output{Content: content}, nil
	}
}

// callFailure says, for the model, why a call got no result.
func callFailure(err error) string {
	if errors.Is(err, mcp.ErrConnectionClosed) {
		return classify.MCPCauseConnectionLost
	}
	return classify.MCPCauseProtocolError
}
