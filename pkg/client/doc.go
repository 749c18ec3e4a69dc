// Package client is toolpool for agents written in Go with
// github.com/anthropics/anthropic-sdk-go: the SDK's tool_use blocks go in,
// the SDK's tool_result params come out, with no glue code.
//
// Pool talks to an orchestrator's HTTP API; Local wraps a dispatcher in the
// same process. Both have the same methods, so an agent runs on either:
//
//	pool, err := client.New("http://127.0.0.1:8080")
//	if err != nil { … }
//	tools, err := pool.Tools(ctx) // for MessageNewParams.Tools
//	…
//	msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: model, MaxTokens: 4096, Messages: messages, Tools: tools})
//	if err != nil { … }
//	messages = append(messages, msg.ToParam())
//	if uses := client.ToolUseBlocks(msg); len(uses) > 0 {
//		results, err := pool.Dispatch(ctx, session, uses) // in parallel on the pool
//		if errors.Is(err, client.ErrUnavailable) { … }    // retry later
//		messages = append(messages, client.UserMessage(results))
//	}
//
// In-process, with a started *toolpool.Orchestrator orch and a definition
// source defs (a Pool, or the tools of a registry):
//
//	local := client.NewLocal(orch, defs)
//
// The conversions between the SDK's types and package envelope's
// (ToolUse, ToolResult, ToolParam, …) are exported for agents that wire
// things themselves. Package agent is a complete loop built on this one.
package client
