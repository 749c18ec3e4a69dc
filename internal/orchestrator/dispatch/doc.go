// Package dispatch is the orchestrator's side of the pool: it turns the
// tool_use blocks of one assistant turn into call envelopes on
// tools.call.<tool> (stream TOOL_CALLS), waits for their results on
// tools.result.<instance>.<key> (stream TOOL_RESULTS) and hands them back in
// the calls' order. A call is identified by its key (envelope.CallKey of the
// tenant, session, id, tool and input): the same call dispatched again runs
// once and gets the first one's result, also from another instance.
//
//	d, err := dispatch.New(dispatch.Config{
//		JS:       js,                                   // a nats.go jetstream.JetStream
//		Instance: "orch-1",                             // results come on tools.result.orch-1.<key>
//		Catalog:  discovery.ConsumerCatalog(js, 0),      // tools with a tool_<name> consumer
//		Logger:   logger,
//	})
//	if err != nil { … }
//	if err := d.Start(ctx); err != nil { … }         // begins consuming results
//	defer d.Stop(context.Background())
//
//	ctx, cancel := context.WithTimeout(ctx, 30*time.Second) // the calls' deadline
//	defer cancel()
//	blocks, err := d.DispatchBlocks(ctx, sessionID, toolUses)
//	if errors.Is(err, dispatch.ErrUnavailable) { … }  // answer 503
//	// blocks are tool_result blocks for the next user message
//
// # What the caller can rely on
//
// Every call of a turn gets exactly one result. Calls run in parallel; the
// turn returns when all results are in or the deadline passes. The
// dispatcher answers by itself, with is_error and nothing published, a call
// without an id, a call to a tool the Catalog does not know (the content
// lists the available tools), and an input that is not a JSON object or is
// too large. A call with no result by the deadline is answered with a
// transient is_error (code deadline_exceeded) that names the tool and the
// wait; its result, if it comes later, is counted as late.
//
// A call's key (envelope.CallKey of the tenant from WithTenant, the
// session, the model's tool_use id, the tool and the input) is the
// Nats-Msg-Id of the call message, so JetStream stores a call once within
// its duplicate window: dispatching the same call again waits for the first
// one's result, or gets it at once from a bounded cache of recent results,
// or, when the first one was dispatched by another instance (or by this
// process before a restart), from TOOL_RESULTS. A restarted NATS server
// forgets the calls that finished (they left TOOL_CALLS), so after its
// start or a reconnection, for at most a duplicate window, the dispatcher
// looks each call up in TOOL_RESULTS before publishing it, and so it does
// for a call the scheduler held for most of a window (recovery.go). The
// same id with other content or in another scope is another call. A
// result delivered twice reaches the caller once.
//
// When one tool has failed Config.FailureThreshold (3) times in a row in a
// session of a tenant, its is_error content gains a sentence telling the
// model to stop retrying it and use a different approach; a success resets
// the count. The count is the fleet's: the replicas tell each other of
// failures on core NATS (advice.go), and successes cost no message.
//
// # Fair shares
//
// Unless Config.NoFairness, a tool's calls beyond its window (the fleet's
// slots, ToolInfo.Slots, plus Config.WindowMargin) wait in the dispatcher
// instead of JetStream, and each free place goes to the waiting call of
// the highest priority (WithPriority), among those to the fairness keys
// in weighted round robin (the tenant, the session or a field of the
// input, as ToolInfo.Fairness says; weights from WithWeight), FIFO within
// a key; a key's calls are also bounded by the tool's per-key limits
// (ToolInfo.PerKey: a concurrency cap, a rate), of which each of the live
// orchestrators applies its share. A call still waiting at its deadline is
// answered with a transient is_error that names the limit that held it
// and when to try again (Retry-After), or says the tool was busy with
// other callers' calls. SchedSnapshot (and a request on
// jetstream.SchedStatsSubject) shows what the scheduler holds.
//
// Dispatch returns an error only when the turn cannot be handled: the
// calls could not be stored (ErrUnavailable), the dispatcher stopped
// (ErrStopped, also ErrUnavailable) or the caller cancelled ctx.
//
// Metrics go to a Metrics interface (NopMetrics by default), so this package
// does not depend on any metrics library.
//
// # Riding out a failover
//
// A call JetStream did not acknowledge (no responders while a cluster
// elects a new stream leader, a PubAck lost with the old leader or not in
// within Config.PublishTimeout, a reconnect) is published again, the same
// message with the same Nats-Msg-Id, so it is still stored once. Attempts
// are spaced by a jittered exponential backoff (about 0.1 s doubling to
// 1 s); each call of a turn is retried on its own, so one slow attempt
// does not hold back the others. This goes on until the call is
// acknowledged or Config.PublishRetryFor (15 s) from the turn's first
// publish is spent, never past the turn's deadline, ctx or Stop; only then
// does Dispatch fail with ErrUnavailable. An error another publish cannot
// cure fails the turn at once: the stream refuses the message (JetStream
// API status 400, such as a message over its max_msg_size), the account
// may not publish to the subject, the connection is closed. A turn logs
// one warning when it starts publishing again and one info line when it
// got through. A turn whose publishes succeed at once pays nothing for
// this: no goroutine and no allocation beyond the messages themselves.
package dispatch
