// Package bench is "orchestrator bench": it loads the pool through its
// whole path and, in the same run and against the same server, a
// raw-JetStream version of that path, and reports the pool's figures next
// to the baseline's.
//
// The pool phase runs simulated agents that dispatch turns of tool calls
// through a dispatch.Dispatcher to in-process worker.Worker instances (or
// to worker processes started separately) and wait for the results. The
// baseline (raw.go) does the same message exchange with nats.go alone:
// same message sizes, same stream and consumer settings under other names,
// publish with Nats-Msg-Id, pull with Consume, publish the result and wait
// for its PubAck, ack, collect with an ordered consumer.
//
//	rep, err := bench.Run(ctx, bench.Config{Calls: 50_000})
//	if err != nil { ... }
//	rep.WriteText(os.Stdout) // the table, the ratios, the headline
//
// Every figure comes with how it was measured: see docs/performance.md.
package bench
