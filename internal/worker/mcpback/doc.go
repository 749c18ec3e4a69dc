// Package mcpback serves the tools of an MCP server as tools of the pool:
// the client side of the Model Context Protocol, on the official Go SDK.
//
// A Backend keeps Sessions connections to one server: a stdio server is a
// process per session (in a process group of its own) that the Backend
// starts and restarts (with backoff) when it dies; a streamable-HTTP
// server is a session per connection. A Set starts the servers of a
// worker together and registers the tools of those that started. At
// Start it lists the server's tools; Tools returns them as tools.Tool
// values with the server's input schemas (validated by the pool's schema
// engine before a call is sent) and the settings of Config.Template, ready
// for a registry. A call runs on the session with the fewest calls in
// flight.
//
// Outcomes: a result with isError is a permanent error whose message for
// the model is the server's own text; JSON-RPC errors, a lost connection
// and a server that is not running are transient (retried), an HTTP 429
// a *classify.HTTPError with its Retry-After; when the
// call's context ends the SDK sends notifications/cancelled to the server.
// The server's notifications/progress reach tools.ReportProgress of the
// call. notifications/tools/list_changed makes the Backend list the tools
// again: the descriptions and schemas of the tools it serves are updated
// (calls are validated against the new schema), the tools it adds are
// served too, calls of tools it removed fail permanently, and
// Config.OnChange is told of every tool served now (the worker registers,
// serves and announces the new ones and withdraws the removed ones). A
// Set retries a server that does not start in the background, with
// backoff; once it is up, OnChange is told of its tools.
//
//	b, err := mcpback.New(mcpback.Config{Name: "everything", Command: []string{"npx", "-y", "@modelcontextprotocol/server-everything"}})
//	if err := b.Start(ctx); err != nil { … } // the server did not start: serve without it
//	for _, t := range b.Tools() { reg.Register(t) }
//	defer b.Stop(ctx)
//
// Content maps both ways without loss of the blocks' data (internal/mcpwire: ToPool,
// FromPool): text is a text block, an image is an Anthropic image block
// with a base64 source, and audio, embedded resources and resource links
// are kept as their MCP JSON, typed "audio", "resource" and
// "resource_link".
package mcpback
