// Package jetstream is toolpool's NATS JetStream topology, in one place:
// the streams and per-tool consumers, their subjects, provisioning, and
// how to connect to a server. It holds names and configurations only: the
// in-process server of a single-binary pool is the root package's
// Embedded, and nothing here links nats-server.
//
// # Topology
//
// Three streams, created by Provision (or by an operator with
// `nats stream add --config streams/<NAME>.json`; the files in streams/
// are the default topology and a test keeps them equal to StreamConfigs):
//
//	stream        subjects                     retention  limits (defaults)                       discard
//	TOOL_CALLS    tools.call.<tool>            workqueue  no max age, no size cap, 2 MiB per msg  new
//	TOOL_RESULTS  tools.result.<orch>.<key>    limits     max age 1h, 2 MiB per msg               old
//	TOOL_DLQ      tools.dlq.<tool>             limits     max age 30 days, 1 GiB in all           old
//
// Two more subjects are core NATS, held by no stream: tools.cancel.<tool>.<key>
// (CancelSubject: an orchestrator cancels a call message, named by its
// sequence in TOOL_CALLS; workers subscribe to tools.cancel.>) and
// tools.progress.<instance>.<key> (ProgressSubject: a worker reports a
// running call's progress to its orchestrator, when the call message has
// the HeaderProgress header).
//
// The three streams use file storage, 1 replica (Config.Replicas: 3 on a cluster)
// and a 2 minute duplicate window. Why:
//
//   - TOOL_CALLS is a work queue: a call is stored until a worker acks it
//     and then deleted, so the stream is the backlog. It allows direct
//     gets, so that `nats stream view TOOL_CALLS` can page the backlog
//     without taking calls; decisions read it with GetMsgFromLeader. Calls do not expire
//     by age: each carries its own deadline, which workers check before
//     starting, so an old call is answered with is_error rather than
//     silently dropped. If Config.CallsMaxBytes caps the queue, discard
//     "new" makes a full queue refuse new calls instead of dropping queued
//     ones: the dispatcher publishes a refused call again while its retry
//     budget lasts (workers make room) and then answers 503.
//     Publishers set Nats-Msg-Id to the call key (envelope.CallKey: tenant,
//     session, call id, tool and input), so the same call published twice
//     within the window is stored once.
//   - TOOL_RESULTS keeps results for an hour, long enough for an
//     orchestrator to collect them after a restart, or another one to find
//     the result of a re-posted call (last by subject tools.result.*.<key>,
//     see LastResult). Workers publish each result on
//     tools.result.<instance>.<key> with Nats-Msg-Id = <instance>.<key>
//     (ResultMsgID), so a result published twice (a
//     worker crashed between publishing and acking, and the redelivered
//     call ran again) is stored once. The window must cover that redelivery:
//     it comes at most AckWait (20 s, whatever the tool's timeout) after
//     the crash, well inside 2 minutes; the orchestrator still tolerates a
//     late duplicate.
//   - TOOL_DLQ keeps dead letters long enough for an operator to drain them
//     after an outage, bounded in bytes; beyond the bound the oldest go
//     first so new failures are always recorded. Its messages are not held
//     to MaxMsgSize: a dead letter carries the whole call plus every
//     attempt's error (the server's max_payload still applies).
//
// One durable pull consumer per tool on TOOL_CALLS, made by EnsureConsumer:
//
//	name              tool_<tool>
//	filter            tools.call.<tool>
//	ack policy        explicit: a call leaves the queue only when a worker acks it
//	ack wait          20 s, a liveness window (AckWaitDefault; ConsumerSpec.AckWait)
//	max deliver       MaxAttempts + 2 (MaxDeliverMargin)
//	max ack pending   the tool's fleet-wide concurrency cap (default 1000)
//	deliver policy    all; no BackOff list
//
// Why: AckWait is how long a call may go without news from its worker, not
// how long it may run. A live worker sends an in-progress ack every
// HeartbeatFor(AckWait) (5 s) for each call it holds, running or queued for
// a slot, so it is never raced by a redelivery however long the tool runs;
// a call whose worker died (kill -9) or whose delivery was lost (a server
// restart) is delivered again within AckWait, for a 10-minute tool as for
// echo. (The AckWait used to be the tool's timeout plus 5 s, so
// such a call waited up to 11 minutes; EnsureConsumer updates old
// consumers in place.) Delays
// between attempts are the worker's NakWithDelay, computed from the tool's
// retry policy, not a server BackOff list. Deliveries past MaxAttempts
// happen only when earlier ones reported nothing (a worker crashed, or handed
// the call back on shutdown); the worker still runs the call then, and
// dead-letters it if that attempt fails, so a rolling restart does not turn
// a healthy call into a dead letter. A call that reaches MaxDeliver (it kept
// killing workers) is no longer delivered but stays in TOOL_CALLS; the
// server announces it on MaxDeliveriesAdvisorySubject(tool) with its stream
// sequence, and the orchestrator's poison watcher (pkg/dlq) sets it aside,
// from the advisory or from its periodic sweep. Delayed NAKs
// count as pending, so MaxAckPending bounds calls in flight and calls
// waiting to retry together.
//
// A work-queue stream accepts only consumers whose filters do not overlap:
// read TOOL_CALLS for monitoring through stream info, not another consumer.
//
// # Changing the topology
//
// Provision is idempotent. On an existing stream, subjects, retention,
// storage and replicas must match the Config, or Provision fails with a
// *ConflictError naming each differing setting; it never changes them,
// since that would move or lose calls. Limits (max_age, max_bytes,
// max_msgs, max_msg_size, duplicate_window, discard) are updated in place
// to the Config's values, and allow_direct is turned on for TOOL_CALLS,
// leaving settings toolpool does not manage alone.
// So change limits through toolpool's configuration, not `nats stream
// edit`: the next Provision would set them back.
//
// # Servers
//
// Connect dials an external server with credentials from
// ConnectOptionsFromEnv (NATS_URL, NATS_CREDS, NATS_USER/NATS_PASSWORD,
// NATS_NKEY, NATS_CA/NATS_CERT/NATS_KEY) and reconnects forever.
// The root package's Embedded runs nats-server in this process with
// JetStream, storing in DataDir/jetstream, for `orchestrator serve` without
// a NATS_URL. Its max_payload is 8 MiB; a stock external server's is
// 1 MiB, which then caps calls and results below Config.MaxMsgSize.
//
// # Example
//
//	nc, err := jetstream.Connect(jetstream.ConnectOptions{URL: "nats://127.0.0.1:4222"})
//	if err != nil {
//		return err
//	}
//	defer nc.Close()
//	j, err := js.New(nc) // js is github.com/nats-io/nats.go/jetstream
//	if err != nil {
//		return err
//	}
//	if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
//		return err
//	}
//	consumer, err := jetstream.EnsureConsumer(ctx, j, jetstream.ConsumerSpec{
//		Tool: "web_search", Timeout: 10 * time.Second, MaxAttempts: 3, Concurrency: 20,
//	})
package jetstream
