package dispatch

import "context"

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
