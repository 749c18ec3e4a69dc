// Package budget spends tool calls' costs from operator-defined budgets,
// fleet-wide, before the calls are published (policy.Budgets).
//
// A budget (Def) names a tenant or one API key, optionally the tools it
// covers, a period (a calendar minute, hour, day or month in UTC, or a
// rolling window) and a limit in calls or cost units. The definitions live
// in the KV bucket BucketDefault, one JSON entry per budget; every
// orchestrator's Store watches the bucket and keeps them in memory, so
// Active is a map look-up and a call no budget applies to costs nothing.
//
// The spending is a JetStream counter stream (StreamDefault, nats-server
// 2.12+ AllowMsgCounter): one subject per budget and period,
// toolpool.spend.<budget>.<period id>. A charge adds the call's cost with
// a Nats-Incr header and reads the new total from the PubAck; when the
// total is over the limit it subtracts the cost again and refuses the call.
// So a budget never admits more than its limit, whatever the number of
// replicas; under a race of refused charges it may admit less (a refused
// charge holds its units for one round trip). A rolling window is split in
// about 60 sub-periods, summed.
//
// The admin functions (Set, Get, Remove, Reset, ListStatus) work on a plain
// jetstream.JetStream, for the `orchestrator budgets` commands.
package budget
