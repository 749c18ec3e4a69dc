// Package tasks keeps durable tasks: one turn of tool calls run in the
// background, its state and its results kept in a JetStream KV bucket
// (BucketDefault) that every orchestrator replica reads. The HTTP API's
// async calls (Prefer: respond-async) and MCP's Tasks are served on it.
//
// A Store is one replica's view of the bucket. Start records a task and
// runs its calls through the replica's dispatcher; the record carries a
// lease the owner refreshes while it works. Get and Wait answer from the
// bucket, on any replica; another tenant's task is ErrNotFound. Cancel
// marks the record cancelled; the owner, which watches the bucket, cancels
// its calls pool-wide. When a lease lapses (its owner died), a replica
// adopts the task (compare-and-set on the record's revision: exactly one
// does) and dispatches the same calls again: calls that ran answer from
// TOOL_RESULTS or their running execution, calls the dead owner still held
// in memory run now, none runs twice.
package tasks
