// Package policy is the orchestrator's gate in front of the dispatcher:
// spend, reuse and consent, decided before a call is published.
//
// A Gate wraps a dispatcher. For each call of a turn it asks, in order:
//
//  1. the result cache (Cache): a stored result of the same tool version
//     and canonical input answers the call without a worker;
//  2. the approval gate (Approvals): a call the tool's rule names waits
//     until a person approves it; a denial or a timeout answers it;
//  3. the budgets (Budgets): the call's cost is spent, fleet-wide, from
//     every budget that applies; a spent budget answers it.
//
// The calls left go to the dispatcher, a cacheable call under an id
// derived from its cache key so that identical calls in flight anywhere in
// the fleet run once (the dispatcher's deduplication by call key). A
// successful result of a cacheable call is stored in the cache.
//
// Each of the three is an interface implemented by its own package
// (budget, rescache, approval) on JetStream; the gate holds the order and
// the model's words (pkg/classify).
package policy
