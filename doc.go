// Package toolpool runs the tool calls of LLM agents on a pool of workers
// over NATS JetStream: calls are validated against each tool's JSON Schema,
// executed under a timeout, retried with backoff when the failure is
// transient, dead-lettered when their attempts run out, and answered with
// an is_error tool_result written for the model when they fail.
//
// # The two halves of a pool
//
// A [Server] is what a worker process is: it pulls the calls of the tools
// in a [Registry] (and of a [Catalog]), executes them and publishes their
// results, announces the tools so orchestrators route calls to it, and
// records failed attempts for the dead letters. Run as many as you like,
// on as many machines as you like, each with its own tools.
//
// An [Orchestrator] is what serves agents: it publishes a model's tool
// calls ([Orchestrator.Dispatch]) and waits for their results, knows which
// tools live workers serve, sets aside calls that stop every worker
// running them, and serves the HTTP API, the MCP server and the
// operators' console ([Orchestrator.Handler]: /v1/..., /mcp, /ui;
// [Orchestrator.ServeMCPStdio] on a host's pipes). A caller that gives up
// cancels its calls pool-wide; a tool's progress (tools.ReportProgress)
// reaches the caller that asked for it.
//
// On one machine both run in one process around an [Embedded] JetStream
// server, which is what `orchestrator serve` does with no --nats-url. At
// scale they connect to a NATS cluster ([Connect]) and run in different
// processes: `orchestrator serve --nats-url … --workers 0` and any number
// of `worker --nats-url …`.
//
// # A pool in a program
//
//	emb, _ := toolpool.NewEmbedded(toolpool.EmbeddedConfig{DataDir: dir})
//	_ = emb.Start(ctx)
//	defer emb.Stop(ctx)
//	nc, _ := emb.Connect("my-program")
//	defer nc.Close()
//
//	_ = toolpool.Provision(ctx, nc, toolpool.StreamsConfig{}) // the streams
//
//	reg := toolpool.NewRegistry()
//	reg.MustRegister(toolpool.Tool{Name: "add", InputSchema: schema, Handler: add})
//	srv, _ := toolpool.NewServer(toolpool.ServerConfig{Conn: nc, Registry: reg})
//	_ = srv.Start(ctx) // pulls the calls of add, announces it
//	defer srv.Stop(ctx)
//
//	orch, _ := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{Conn: nc})
//	_ = orch.Start(ctx) // sees the tools announced
//	defer orch.Stop(ctx)
//
//	results, err := orch.Dispatch(ctx, "session-1", []toolpool.ToolUse{
//		{ID: "toolu_1", Name: "add", Input: json.RawMessage(`{"a":2,"b":3}`)},
//	})
//
// The example of [NewOrchestrator] runs this program.
//
// # Tools from a catalog file
//
// [LoadCatalog] reads a catalog file — the YAML or JSON of
// `worker --tools FILE`, docs/tools.md: webhook, exec, built-in and MCP
// server tools — and checks it whole, every error naming the file, the
// line, the tool and the field. Given to a Server ([ServerConfig.Catalog]),
// its tools are served like the program's own; its MCP servers start with
// the Server, are followed while they run (a server that is down is
// retried and its tools served once it is up), report in the Server's
// readiness, and stop with it:
//
//	catalog, err := toolpool.LoadCatalog(toolpool.CatalogConfig{File: "tools.yaml"})
//	srv, err := toolpool.NewServer(toolpool.ServerConfig{Conn: nc, Catalog: catalog})
//
// The example of [LoadCatalog] serves a webhook tool this way.
//
// # The HTTP API in a program
//
// [Orchestrator.Handler] serves the agent API (POST /v1/tool_calls in the
// Anthropic, OpenAI, Responses and Gemini shapes, GET /v1/tools), /mcp,
// the console and the health probes: mount it on a mux of the program's,
// with [APIKey]s to let agents in by tenant, or serve it on the network
// with [Orchestrator.NewHTTPServer], which adds the checks a server
// facing it needs (hosts, browsers' origins, connection and request
// limits, a drain):
//
//	orch, _ := toolpool.NewOrchestrator(toolpool.OrchestratorConfig{
//		Conn:    nc,
//		APIKeys: []toolpool.APIKey{{Tenant: "team-a", Key: secret, Tools: []string{"add"}}},
//	})
//	mux.Handle("/v1/", orch.Handler())
//
// The example of [Orchestrator.Handler] posts a call through it.
//
// # Conventions
//
// Every long-lived component has one lifecycle: a constructor that checks
// its config and touches nothing, Start(ctx) that returns once the
// component works, Stop(ctx) that drains (work in progress may finish
// until ctx ends) and then cancels what is left with a named cause, and
// Stopped() closed once it has stopped. Stop them in the reverse order of
// their start: the HTTP server, then the Orchestrator, then the Servers,
// then the embedded server. [Provision] makes the streams before any of
// them starts.
//
// Every config is one flat struct of this package's own fields, each
// documenting its default: zero fields take them (WithDefaults, with
// exported XxxDefault constants), and Validate names the field that is
// wrong. A nil Logger means slog.Default(). One [MetricsRegistry] may
// hold the metrics of a process's Servers and Orchestrators.
//
// docs/architecture.md maps the packages and a call's path through them.
package toolpool
