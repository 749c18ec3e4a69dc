package tools

import (
	"fmt"
	"slices"
	"time"
)

// Bounds of a tool's Cost and of its CachePolicy.TTL.
const (
	// CostMax is the largest Tool.Cost: a million units per call, far
	// beyond any budget's use, and small enough that no sum of costs
	// overflows.
	CostMax = 1_000_000
	// CacheTTLMin and CacheTTLMax bound CachePolicy.TTL: the store keeps
	// results for whole seconds, and a week is its longest retention.
	CacheTTLMin = time.Second
	CacheTTLMax = 7 * 24 * time.Hour
)

// Check returns the problem with p ("" for none) and the field it is in,
// "ttl" or "scope": TTL must be between CacheTTLMin and CacheTTLMax, Scope
// "", CacheScopeTenant or CacheScopeGlobal.
func (p *CachePolicy) Check() (field, problem string) {
	switch {
	case p.TTL <= 0:
		return "ttl", fmt.Sprintf("is required and must be positive, got %v", p.TTL)
	case p.TTL < CacheTTLMin:
		return "ttl", fmt.Sprintf("must be at least %v, got %v", CacheTTLMin, p.TTL)
	case p.TTL > CacheTTLMax:
		return "ttl", fmt.Sprintf("must be at most %v (7 days), got %v", CacheTTLMax, p.TTL)
	}
	switch p.Scope {
	case "", CacheScopeTenant, CacheScopeGlobal:
		return "", ""
	}
	return "scope", fmt.Sprintf("must be %s or %s, not %q", CacheScopeTenant, CacheScopeGlobal, p.Scope)
}

// Cacheable reports whether a tool with these settings may have its
// results cached (Tool.Cache): it is idempotent, or read-only by its
// hints. A result served from the cache stands for running the tool
// again, which only such a tool allows.
func Cacheable(idempotent bool, hints Hints) bool {
	return idempotent || hints.ReadOnly != nil && *hints.ReadOnly
}

// checkPolicy checks t's Cost, Cache and Approval (Register's part).
func checkPolicy(t *Tool) *RegisterError {
	switch {
	case t.Cost < 0:
		return fieldError("cost", "cost", fmt.Sprintf("must be >= 0 (0 is the default, 1), got %d", t.Cost))
	case t.Cost > CostMax:
		return fieldError("cost", "cost", fmt.Sprintf("must be at most %d, got %d", CostMax, t.Cost))
	}
	if t.Cache != nil {
		if field, problem := t.Cache.Check(); field != "" {
			return fieldError("cache."+field, "cache."+field, problem)
		}
		if !Cacheable(t.Idempotent, t.Hints) {
			return fieldError("cache", "cache",
				"needs an idempotent tool (Idempotent: true) or a read-only one (Hints.ReadOnly: true): a cached result is served instead of running the tool again")
		}
	}
	if t.Approval != nil {
		if field, problem := t.Approval.Check(); field != "" {
			return fieldError("approval."+field, "approval."+field, problem)
		}
	}
	return nil
}

// ownPolicy gives t copies of its Cache and Approval, so that the caller's
// later changes to what they point at do not reach the registered tool.
func ownPolicy(t *Tool) {
	if t.Cache != nil {
		c := *t.Cache
		t.Cache = &c
	}
	if t.Approval != nil {
		a := *t.Approval
		a.When = slices.Clone(a.When)
		t.Approval = &a
	}
}
