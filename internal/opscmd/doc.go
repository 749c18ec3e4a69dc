// Package opscmd holds the orchestrator's commands for operators and
// load: "dlq ls|show|replay|purge" (the dead letters in TOOL_DLQ),
// "status" (per tool, and with --by-key per fairness key), "bench" (the
// whole path against a raw-JetStream baseline, or the noisy-neighbour
// scenario) and "run" (an agent loop on the Anthropic Messages API whose
// tool calls run on the pool). Each is an internal/cli.Command built by
// its constructor, which the orchestrator binary lists in its tree:
//
//	Commands: []*cli.Command{
//		…,
//		opscmd.Run(pool), // pool: the Pool run starts when --api is not given
//		opscmd.DLQ(),
//		opscmd.Status(),
//		opscmd.Bench(),
//	}
//
// A command's flags live in its constructor's closure, or, for the larger
// ones (bench, run, dlq replay), in a small type with a register method
// for the flag set and a run method; the work itself is in the packages
// the commands drive (internal/fleet/dlq and ops, internal/bench,
// internal/agent).
// Flags, outputs and exit codes are those of the orchestrator binary:
// exit 0 on success, 1 when the command failed, 2 on usage or connection
// errors (run: 3 at the iteration limit).
package opscmd
