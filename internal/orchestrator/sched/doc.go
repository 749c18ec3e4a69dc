// Package sched is the orchestrator's scheduler of tool calls: fair shares
// between fairness keys (weighted deficit round robin), per-key
// concurrency caps and rate limits, and priorities. It decides which
// waiting call is published next; the dispatcher publishes it. It does no
// I/O.
package sched
