package toolpool

import (
	"context"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
)

// WithTenant returns ctx carrying the tenant the calls Dispatch publishes
// under it belong to (what an API key names at the HTTP API): it scopes
// deduplication and sessions, labels the tenant's metrics and is the unit
// of fair shares. "" is the default tenant.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return dispatch.WithTenant(ctx, tenant)
}

// WithWeight returns ctx carrying the weight of the tenant in fair shares
// (APIKey.Weight): when a tool is saturated, each of its fairness keys
// gets weight turns to every turn of a key of weight 1. Default 1.
func WithWeight(ctx context.Context, weight int) context.Context {
	return dispatch.WithWeight(ctx, weight)
}

// WithPriority returns ctx carrying the priority of the calls Dispatch
// publishes under it. An unknown priority is PriorityNormal.
func WithPriority(ctx context.Context, p Priority) context.Context {
	dp, _ := dispatch.ParsePriority(string(p))
	return dispatch.WithPriority(ctx, dp)
}

// WithTraceparent returns ctx carrying a W3C traceparent ("00-<32 hex
// trace id>-<16 hex parent id>-<2 hex flags>") that Dispatch puts on every
// call, so that the calls join the caller's trace. An invalid value is
// ignored: Dispatch then starts a new trace.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	return dispatch.WithTraceparent(ctx, traceparent)
}
