// Package ops is what the operators' commands do, apart from their flags
// and output. Status reports the state of a toolpool fleet: per tool, the
// calls queued, in flight and redelivered (from the tool's consumer on
// TOOL_CALLS), its dead letters (TOOL_DLQ), whether it is paused after a
// rate limit, and the live workers serving it (the discovery bucket);
// `orchestrator status` prints it. LiveTools lists the live tools with
// their workers (`orchestrator tools --workers`), and Call sends one call
// through the pool (`orchestrator call`).
//
//	live, err := discovery.NewCatalog(discovery.CatalogConfig{JetStream: js})
//	if err == nil { err = live.Start(ctx) }
//	if err != nil { … }
//	defer live.Stop(context.Background())
//	tools, err := ops.Status(ctx, js, live)
//	for _, t := range tools {
//		fmt.Println(t.Tool, t.Pending, t.InFlight, t.DeadLetters, len(t.Workers))
//	}
package ops
