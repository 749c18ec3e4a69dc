// Package backlog watches the pool's queues through time. A Monitor,
// started with every orchestrator, reads each tool's backlog fleet-wide
// (the calls queued in TOOL_CALLS and not yet delivered, the age of the
// oldest of them, the calls running and those held by the schedulers),
// judges it (ok, backing up, stalled, with the reason), estimates when it
// drains, and every 10 seconds writes one sample of the fleet's state to
// the TOOLPOOL_HISTORY stream: per tool and for the pool, the results per
// second, the errors per second by class, the p50 and p99 execution times
// and the backlog. Every replica samples; the stream's deduplication
// (Nats-Msg-Id "hist-<slot>") keeps one sample per slot, so the history is
// the fleet's and survives any one orchestrator. The console draws its
// charts from Range and its states from Backlog; the orchestrator's
// metrics export the same states.
//
//	m, err := backlog.New(backlog.Config{JetStream: j, Live: live, Instance: id})
//	if err == nil { err = m.Start(ctx) }
//	if err != nil { … }
//	defer m.Stop(context.Background())
//	tools, err := m.Backlog(ctx)   // now
//	hour, err := m.Range(ctx, time.Now().Add(-time.Hour))
package backlog
