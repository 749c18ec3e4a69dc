package mcpfront

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// How tasks are advertised. The extension (2026-07-28) is one entry of
// the server's capabilities.extensions (New adds it), in server/discover
// and initialize alike; the extension lets the server decide per request
// and has no per-tool field. Revision 2025-11-25 asks for more, which the
// go-sdk's types cannot carry: capabilities.tasks in the initialize
// result (tasks/cancel, and task-augmented tools/call), and
// execution.taskSupport on each tool of tools/list ("optional": any pool
// tool may be called either way). advertTasks adds them to the JSON of
// the go-sdk's results, for sessions of that revision.

// legacyTaskCapability is 2025-11-25's capabilities.tasks: tasks/cancel
// and task-augmented tools/call (no tasks/list: a task is found by its id
// only, as the extension has it).
var legacyTaskCapability = json.RawMessage(`{"cancel":{},"requests":{"tools":{"call":{}}}}`)

// hasLegacyTasks reports whether revision v has tasks in the core
// protocol: 2025-11-25 (before, there were none; after, the extension).
func hasLegacyTasks(v string) bool { return v >= "2025-11-25" && v < revisionStateless }

// advertTasks is the receiving middleware, outermost, that adds
// 2025-11-25's task fields to initialize and tools/list.
func (s *Server) advertTasks(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.InitializeResult:
			if hasLegacyTasks(r.ProtocolVersion) {
				return patched{r, func(m map[string]json.RawMessage) error {
					return patchObject(m, "capabilities", func(caps map[string]json.RawMessage) error {
						caps["tasks"] = legacyTaskCapability
						return nil
					})
				}}, nil
			}
		case *mcp.ListToolsResult:
			ss, _ := req.GetSession().(*mcp.ServerSession)
			if ss != nil && ss.InitializeParams() != nil && hasLegacyTasks(ss.InitializeParams().ProtocolVersion) {
				return patched{r, optionalTasks}, nil
			}
		}
		return res, err
	}
}

// optionalTasks sets execution.taskSupport "optional" on each tool of a
// tools/list result.
func optionalTasks(m map[string]json.RawMessage) error {
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(m["tools"], &list); err != nil {
		return err
	}
	for _, t := range list {
		t["execution"] = json.RawMessage(`{"taskSupport":"optional"}`)
	}
	b, err := marshal(list)
	m["tools"] = b
	return err
}

// patched is a go-sdk result written with fields the go-sdk's type does
// not have.
type patched struct {
	mcp.Result
	patch func(map[string]json.RawMessage) error
}

// MarshalJSON writes the result, patched.
func (p patched) MarshalJSON() ([]byte, error) {
	b, err := marshal(p.Result)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if err := p.patch(m); err != nil {
		return b, nil // as the go-sdk wrote it
	}
	return marshal(m)
}

// patchObject patches the object m[key] (created when missing).
func patchObject(m map[string]json.RawMessage, key string, patch func(map[string]json.RawMessage) error) error {
	inner := map[string]json.RawMessage{}
	if raw, ok := m[key]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &inner); err != nil {
			return err
		}
	}
	if err := patch(inner); err != nil {
		return err
	}
	b, err := marshal(inner)
	m[key] = b
	return err
}
