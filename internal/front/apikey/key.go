package apikey

import (
	"context"
	"slices"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
)

// Key is one API key: the tenant it names and what it may do. The secret
// itself is not kept, only its SHA-256.
type Key struct {
	// Tenant names whose calls these are: it scopes deduplication and
	// sessions, and labels the tenant's metrics. Letters, digits, '_', '-'
	// and '.', at most 64.
	Tenant string
	// Name names the key itself, for budgets set on one key
	// (policy.WithKeyName) and for who decided an approval over MCP: ""
	// for a key without one. Unique among the keys; the tenant rule.
	Name string
	// Tools lists the tools the key may call and list; nil: all of them.
	Tools []string
	// Metrics allows GET /metrics where it needs a key (see
	// httpapi.ServerConfig.Keys).
	Metrics bool
	// Weight is the tenant's weight in fair shares (dispatch.WithWeight):
	// when a tool is saturated, each of the tenant's fairness keys gets
	// Weight turns to every turn of a key of weight 1. At least 1; every
	// key of a tenant has the tenant's weight (default 1).
	Weight int
	// Priority is the priority of the key's calls when a request asks for
	// none (dispatch.WithPriority). Default dispatch.PriorityNormal.
	Priority dispatch.Priority
	// MaxPriority is the highest priority a request with this key may ask
	// for (header Toolpool-Priority or ?priority=). Default Priority: a
	// request may lower its calls' priority, not raise it.
	MaxPriority dispatch.Priority

	from      string // where the key is defined, for errors: "keys.yaml: keys[2]"
	seq       int    // the order keys were read in
	weightSet bool   // the entry gives the weight
}

// Allows reports whether k may call tool.
func (k *Key) Allows(tool string) bool {
	return k.Tools == nil || slices.Contains(k.Tools, tool)
}

type keyCtx struct{}

// NewContext returns ctx carrying the key a request authenticated with.
func NewContext(ctx context.Context, k *Key) context.Context {
	return context.WithValue(ctx, keyCtx{}, k)
}

// FromContext returns the key the request of ctx authenticated with, if
// any (NewContext).
func FromContext(ctx context.Context) (*Key, bool) {
	k, ok := ctx.Value(keyCtx{}).(*Key)
	return k, ok && k != nil
}
