// Package mcpfront is the pool as an MCP server: the front door for agent
// hosts that speak the Model Context Protocol (Claude Code, Claude
// Desktop, Cursor, the OpenAI Agents SDK and others), built on the
// official Go SDK.
//
// tools/list is the live catalog, with each tool's description, input
// schema and the hints the catalog knows (idempotentHint from
// tools.Tool.Idempotent); when workers start or stop serving a tool,
// connected clients get notifications/tools/list_changed. tools/call runs
// through the Dispatcher like any call of the pool (validated, queued,
// retried, dead-lettered): its result keeps every content block, an
// is_error result is an isError result with the same text the HTTP API
// gives, and a call to a tool that does not exist is the protocol error
// -32602 (invalid params). The host's MCP session is the pool's session,
// so the advice after repeated failures is per host conversation. A
// client that cancels a call (notifications/cancelled) cancels it in the
// pool; one that sent a progressToken gets notifications/progress.
//
// With Config.Tasks (the fleet's task store), a client that asks for it
// (the Tasks extension of 2026-07-28, or params.task of 2025-11-25) gets
// a task for its tools/call at once, and tasks/get, tasks/cancel and
// tasks/result are answered by any replica: tasks.go.
//
// Serve it over streamable HTTP (Handler, mounted on /mcp by the
// orchestrator next to the HTTP API) or stdio (ServeStdio, orchestrator
// mcp). On /mcp, a tools/call of the common shape on a session the go-sdk
// opened is read and answered here, with the bytes the go-sdk writes
// (fastcall.go: the go-sdk's decoding was the front door's largest cost);
// every other message goes through the go-sdk:
//
//	srv, err := mcpfront.New(mcpfront.Config{Dispatcher: orch, Tools: ..., Subscribe: ...})
//	...
//	if err := srv.Start(ctx); err != nil { ... }
//	defer srv.Stop(ctx)
//	mux.Handle(mcpfront.Path, srv.Handler())
package mcpfront
