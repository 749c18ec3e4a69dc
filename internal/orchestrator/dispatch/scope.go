package dispatch

import (
	"context"
	"fmt"
)

type tenantKey struct{}

// WithTenant returns ctx carrying the tenant the calls dispatched under it
// belong to: the tenant an API key names, at the HTTP front door. The
// tenant scopes deduplication and session advice (a result is never
// delivered to another tenant) and labels the tenant's metrics. An empty
// tenant is the default tenant of a pool without API keys.
func WithTenant(ctx context.Context, tenant string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// TenantFrom returns the tenant WithTenant put in ctx, or "" for none.
func TenantFrom(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// Priority orders a tool's waiting calls: a waiting call of a higher
// priority is published before any waiting call of a lower one.
type Priority int8

// The priorities.
const (
	PriorityLow    Priority = -1
	PriorityNormal Priority = 0 // the default
	PriorityHigh   Priority = 1
)

// String is the priority's name: "low", "normal" or "high".
func (p Priority) String() string {
	switch {
	case p > PriorityNormal:
		return "high"
	case p < PriorityNormal:
		return "low"
	}
	return "normal"
}

// ParsePriority reads "low", "normal" or "high" ("" is normal).
func ParsePriority(s string) (Priority, error) {
	switch s {
	case "low":
		return PriorityLow, nil
	case "", "normal":
		return PriorityNormal, nil
	case "high":
		return PriorityHigh, nil
	}
	return PriorityNormal, fmt.Errorf("priority %q: want low, normal or high", s)
}

type priorityKey struct{}

// WithPriority returns ctx carrying the priority of the calls dispatched
// under it.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityFrom returns the priority WithPriority put in ctx, or
// PriorityNormal.
func PriorityFrom(ctx context.Context) Priority {
	p, _ := ctx.Value(priorityKey{}).(Priority)
	return p
}

type weightKey struct{}

// WithWeight returns ctx carrying the weight of the tenant whose calls are
// dispatched under it: each of the tenant's fairness keys gets weight
// shares of a saturated tool's free slots to every one share of a key of
// weight 1.
func WithWeight(ctx context.Context, weight int) context.Context {
	return context.WithValue(ctx, weightKey{}, weight)
}

// WeightFrom returns the weight WithWeight put in ctx, or 1 (also for a
// weight below 1).
func WeightFrom(ctx context.Context) int {
	w, _ := ctx.Value(weightKey{}).(int)
	return max(w, 1)
}
