// Package worker executes tool calls: it pulls call envelopes from the
// durable consumers tool_<name> of stream TOOL_CALLS, validates each input
// against its tool's JSON Schema, runs the tool under its timeout, and
// publishes a result on tools.result.<instance>.<key> (stream TOOL_RESULTS)
// for the orchestrator that waits for it. A redelivered call, and every call
// of a tool that is not idempotent, is first looked up there: a call whose
// result is stored is answered from it. A tool that is not idempotent is
// never started after an attempt that started and did not report (see
// OutcomeUnknown).
//
//	reg := tools.NewRegistry()
//	if err := reg.Register(myTool); err != nil { … }
//	w, err := worker.New(worker.Config{
//		JetStream:   js,   // a nats.go jetstream.JetStream
//		Registry:    reg,
//		Concurrency: 64,   // calls at once, over all tools
//	})
//	if err != nil { … }
//	err = w.Run(ctx)   // serves until ctx is done, then drains
//
// Start creates or updates each tool's consumer from the tool's settings
// (AckWait the liveness window Config.AckWait, MaxDeliver from its attempts, MaxAckPending
// from its fleet-wide concurrency), so any number of workers on any number
// of machines share the work of a tool. A started worker serves more tools
// of its registry with Serve (tools registered at runtime) and stops
// pulling a tool with Unserve: its last pull is drained, and the calls it
// pulled but did not start go back to JetStream for another worker.
//
// # One call
//
// A malformed envelope is dead-lettered with the reason and terminated.
// A call past its deadline gets an is_error result without running. An
// input the schema refuses gets a validation is_error that names every bad
// field, and the tool never runs. Otherwise the tool runs under its
// timeout (cut to the call's deadline) while the worker sends in-progress
// acks every AckWait/4 (as it does for a call queued for a slot, so a call
// held by a live worker is never delivered again, and one held by a dead
// worker comes back within AckWait); a panic becomes an internal is_error. Then one
// decision, the tool's classify.Policy.Decide, gives the call its fate, and
// one settle step, settle.Settle, carries it out on the message: a success or
// a permanent failure is answered and acked; a transient failure with
// attempts left is NAKed with a jittered backoff (honouring Retry-After)
// and JetStream delivers it again; a transient failure out of attempts is
// dead-lettered to TOOL_DLQ and answered with an is_error that says so.
// The same decision and step settle a message that does not decode
// (dead-lettered and terminated), a call whose deadline passed before it
// started (dead-lettered, reason expired), one answered from its stored
// result, one of a tool that is not idempotent whose earlier attempt never
// reported (outcome_unknown), and a call handed back on shutdown. A result
// is published before its call is acked, and a publish that fails
// transiently is retried in place (Config.PublishRetryFor), so a call is
// never acked without its result stored; one that still fails hands the
// call back after the tool's base retry delay.
//
// # Pulling
//
// Each tool has one pull loop that asks for at most as many calls as the
// worker has free slots, and waits while none is: a busy worker leaves
// calls in the stream for workers with room, and no pulled call waits
// unseen in a client buffer where nothing keeps it alive. Calls that a
// pull receives after the slots filled up (several tools pulled for the
// same free slots) queue for a slot, oldest first, with in-progress acks.
//
// # Cancellation and progress
//
// A worker subscribes to tools.cancel.> before it pulls. When a call's
// caller gives up, its orchestrator names the call's message there: a
// running call's context is cancelled with ErrCancelled as its cause, a
// call queued for a slot or not started yet is settled without running,
// and a cancellation that comes before its message is remembered a minute
// (cancel.go). Such a call is acked, neither retried nor dead-lettered nor
// answered (classify.CaseCancelled), and recorded in the attempt history
// as cancelled. A handler reports progress with tools.ReportProgress: the
// worker sends an in-progress ack (at most once a second) and, when the
// caller asked for progress, the report to its orchestrator on
// tools.progress.<instance>.<key>, at most one every 100 ms, the last one
// winning (progress.go).
//
// # Tracing
//
// With Config.Tracer set, every delivery is an OpenTelemetry span
// "execute_tool <tool>", a child of the call's traceparent, from the
// delivery to its settle, with the GenAI conventions' attributes, the
// attempt, error.type "<class>.<code>" on a failure and the events retry,
// dead_letter and handed_back; the first delivery also has a span
// "queued <tool>" from the message's publish to the delivery. The
// handler's context carries the execute_tool span, and its
// tools.CallInfo.Traceparent is that span's (trace.go). A nil Tracer
// costs a nil check per step.
//
// # Shutdown
//
// Stop (and Run, when its context ends) stops pulling (open pulls are
// drained, not cut off: what they still bring is handed back), then hands
// queued calls back, lets running calls finish until its context or
// Config.DrainTimeout ends, then cancels the rest with ErrShutdown (their
// contexts' cause) and hands them back (NAK without delay) so another
// worker takes them. Stopped is closed once everything the worker started
// has returned.
package worker
