// Package dlq keeps toolpool's dead letters: the calls set aside in the
// TOOL_DLQ stream (subjects tools.dlq.<tool>) with why, and every failed
// attempt. JetStream keeps no dead letters of its own (its MAX_DELIVERIES
// advisory only points at a message), so toolpool writes them:
//
//   - a worker dead-letters a call whose transient failures outlived its
//     attempts (classify.FateExhausted), a call message it cannot decode
//     (classify.FateMalformed), a call whose deadline passed before it started
//     (classify.FateExpired), and a call of a tool that is not idempotent whose
//     earlier attempt started and never reported (classify.FateOutcomeUnknown);
//   - a PoisonWatcher, run by the orchestrator, dead-letters a call that
//     reached its consumer's MaxDeliver without any worker reporting on it
//     — it kills the worker running it (classify.FatePoison) — answers its caller
//     with an is_error result and removes it from TOOL_CALLS. It hears of
//     such calls from the server's MAX_DELIVERIES advisory and, because
//     advisories are not stored, also sweeps TOOL_CALLS for them at start
//     and every PoisonConfig.SweepInterval (15 s), so a missed advisory
//     delays a poison call but never strands it.
//
// The orchestrator runs the watcher for as long as it serves:
//
//	w, err := dlq.NewPoisonWatcher(dlq.PoisonConfig{Conn: nc, JetStream: js, History: h})
//	if err == nil {
//		err = w.Start(ctx)
//	}
//	defer w.Stop(ctx)
//
// Both the worker and the watcher settle a call through Settle: the
// verdict of classify.Policy.Decide, carried out on a settle.Message (the call
// message's verbs) in the order that loses no call.
//
// An settle.Entry holds the original call message unchanged, the reason, the last
// error, the attempts and the first and last failure times; the essentials
// are in Toolpool-* headers too, so `nats stream view TOOL_DLQ` shows them.
//
// # settle.Attempt history
//
// Attempts of one call may run on different workers, so each failed
// attempt is appended to a History: a JetStream KV bucket
// (toolpool_attempts, 24h TTL) with one key per call key. A worker given a
// History (worker.Config.History) records every failed attempt and reads
// them all into the dead letter, and marks the start of each attempt of a
// tool that is not idempotent (settle.History.Begin); successes of idempotent
// tools write nothing.
//
//	h, err := dlq.OpenHistory(ctx, js, dlq.HistoryConfig{})
//	w, err := worker.New(worker.Config{JetStream: js, Registry: reg, History: h})
//
// # Operating the dead letters
//
// A Store lists, shows, replays and purges them; `orchestrator dlq` is its
// command line.
//
//	s, err := dlq.NewStore(ctx, js)
//	letters, err := s.List(ctx, dlq.Filter{Tool: "search", Reason: classify.FateExhausted})
//	n, err := s.Replay(ctx, seqs, dlq.ReplayConfig{Rate: 5}, func(r dlq.Replayed) { … })
//
// Replay republishes each call with a new id, ReplayID(original id, dead
// letter sequence), that records the original (envelope.Call.OriginalID),
// and removes the dead letter only once TOOL_CALLS acknowledged the call.
// To see the replayed calls' results, publish them under a ReplyTo of
// your own and wait for them with ReplayResults, started before Replay (it
// takes them with the dispatcher's result consumer, dispatch.ConsumeResults):
//
//	w, err := dlq.WatchReplayResults(ctx, js, "replay-1")
//	defer w.Stop()
//	n, err := s.Replay(ctx, seqs, dlq.ReplayConfig{ReplyTo: "replay-1"}, w.Expect)
//	failed := w.Wait(ctx, time.Minute, func(r dlq.Replayed, res *envelope.Result) { … })
package dlq
