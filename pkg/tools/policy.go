package tools

import "time"

// Scopes of CachePolicy.Scope.
const (
	// CacheScopeTenant shares a cached result within the tenant whose
	// call produced it: the default.
	CacheScopeTenant = "tenant"
	// CacheScopeGlobal shares it with every tenant; it must be chosen
	// explicitly, for tools whose answer does not depend on who asks.
	CacheScopeGlobal = "global"
)

// CachePolicy says how long, and with whom, a tool's successful results
// are shared. A call whose tool, tool version and input (in canonical
// form: key order and insignificant whitespace do not matter) match a
// stored result is answered from it by any orchestrator without running;
// identical calls that arrive while the first runs wait for its result.
type CachePolicy struct {
	// TTL is how long a result is kept. Required, positive.
	TTL time.Duration `json:"ttl_ns"`
	// Scope is CacheScopeTenant (the default, also for "") or
	// CacheScopeGlobal.
	Scope string `json:"scope,omitempty"`
}

// ApprovalRule says which of a tool's calls wait for a person's approval
// before they run.
type ApprovalRule struct {
	// When lists conditions on the call's input; a call needs approval
	// when any of them holds. Empty: every call needs approval.
	When []ApprovalMatch `json:"when,omitempty"`
	// Timeout is how long a call waits for a decision before it is
	// answered as not approved. Default ApprovalTimeoutDefault (for 0).
	Timeout time.Duration `json:"timeout_ns,omitempty"`
}

// ApprovalMatch is one condition of an ApprovalRule: the input's field
// matches a pattern.
type ApprovalMatch struct {
	// Field names a field of the input: "input.path", or a nested one,
	// "input.target.host".
	Field string `json:"field"`
	// Pattern is a glob the field's value (a string, or a number or
	// boolean in its JSON form) is matched against.
	Pattern string `json:"pattern"`
}
