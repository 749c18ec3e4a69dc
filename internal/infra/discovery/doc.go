// Package discovery keeps the set of live tools: every worker announces the
// tools it serves in a JetStream KV bucket (toolpool_tools by default), one
// key "<tool>.<worker>" per tool, holding the tool's definition, the
// worker's id, the tool's timeout and max attempts and when the worker
// started. The bucket's max age is the announcements' TTL (30s by default):
// a worker rewrites its keys every TTL/3, deletes them when it stops
// cleanly, and a worker that dies simply stops refreshing them, so they
// expire one TTL later. Each announcement also names the worker's liveness
// subject (LivenessPrefix and a token), which the worker subscribes to on
// its NATS connection: a Catalog probes it every second and stops counting
// a worker whose subject has had no subscriber for GoneAfter (5s), so a
// killed worker is noticed long before its announcements expire.
//
// A worker announces around its own start and stop:
//
//	a, err := discovery.NewAnnouncer(discovery.AnnouncerConfig{
//		JetStream: js, Registry: reg, WorkerID: w.ID(), Logger: log,
//	})
//	if err != nil { … }
//	if err := w.Start(ctx); err != nil { … }
//	if err := a.Start(ctx); err != nil { … } // the tools are live
//	…
//	_ = a.Stop(ctx) // withdrawn: no new calls are routed here
//	_ = w.Stop(ctx) // the calls in flight finish
//
// An orchestrator reads the live set with a Catalog, which watches the
// bucket and answers from memory. It is a dispatch.Catalog: a call to a
// tool no live worker serves is answered at once, "no worker serves X
// right now" when the tool is known (it has a consumer on TOOL_CALLS) and
// "unknown tool" otherwise.
//
//	c, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: js})
//	if err == nil { err = c.Start(ctx) }
//	if err != nil { … }
//	defer c.Stop(context.Background())
//	d, err := dispatch.New(dispatch.Config{JS: js, Catalog: c, …})
//	defs := c.Definitions(ctx)          // Anthropic tools format, one per tool
//	workers := c.Workers(ctx, "search") // who serves it
package discovery
