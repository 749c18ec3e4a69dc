// Package approval holds tool calls until a person decides: the
// orchestrator's implementation of policy.Approvals on a JetStream KV
// bucket (BucketDefault) that every replica shares.
//
// A call whose tool's rule (tools.ApprovalRule) holds for its input is
// recorded under an id derived from its call key (ID): the same call sent
// again, to any replica, finds the same record. The record binds the
// approval to the call's tenant, tool and exact input (Record.Binding, the
// hash shown to the approver) and moves once from pending to approved,
// denied or timed_out, by compare-and-set on its revision: two deciders
// never both win, and a decision after the deadline is refused.
//
// An approval is for one run (use.go): the gate calls Use before it lets
// an approved call through, which records the use; the call sent again
// while its run's result is kept (TOOL_RESULTS' max age, on the servers'
// clock) goes on and is answered from that result; sent again later, the
// approval is spent and the record is pending again, the spent approval
// kept in Record.Previous, for a new decision.
//
// A Store started with Start watches the bucket: a Wait wakes on the
// decision made on any replica (or by the CLI), and the replica writes
// timed_out for a pending record whose deadline passed. Open binds the
// bucket without watching it, for commands that list, show and decide.
// Every decision, and every timeout written, is logged by the process
// that made it ("approval decided", "approval timed out").
package approval
