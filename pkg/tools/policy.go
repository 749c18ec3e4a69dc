package tools

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
)

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

// ApprovalTimeoutDefault is ApprovalRule.Timeout's default; ApprovalTimeoutMax
// its largest value.
const (
	ApprovalTimeoutDefault = 15 * time.Minute
	ApprovalTimeoutMax     = 7 * 24 * time.Hour
)

// TimeoutOrDefault is r.Timeout, or ApprovalTimeoutDefault for 0.
func (r *ApprovalRule) TimeoutOrDefault() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return ApprovalTimeoutDefault
}

// Requires reports whether a call with input (a JSON object) needs
// approval under r: r has no conditions, or one of them holds. An input
// that is not a JSON object needs approval whenever r has conditions it
// cannot rule out (the dispatcher refuses such input anyway).
func (r *ApprovalRule) Requires(input json.RawMessage) bool {
	if r == nil {
		return false
	}
	if len(r.When) == 0 {
		return true
	}
	var obj map[string]any
	if err := json.Unmarshal(input, &obj); err != nil {
		return true
	}
	for _, m := range r.When {
		v, ok := fieldValue(obj, m.Field)
		if ok && globMatch(m.Pattern, v) {
			return true
		}
	}
	return false
}

// Check returns the problem with r ("" for none) and the field it is in,
// as "when[1].pattern".
func (r *ApprovalRule) Check() (field, problem string) {
	switch {
	case r.Timeout < 0:
		return "timeout", "must be positive"
	case r.Timeout > ApprovalTimeoutMax:
		return "timeout", "must be at most " + ApprovalTimeoutMax.String()
	}
	for i, m := range r.When {
		at := "when[" + strconv.Itoa(i) + "]"
		switch {
		case !strings.HasPrefix(m.Field, "input.") || len(m.Field) == len("input."):
			return at + ".field", fmt.Sprintf("%q must name a field of the input, as input.path or input.target.host", m.Field)
		case m.Pattern == "":
			return at + ".pattern", "is empty"
		}
		if _, err := path.Match(strings.ReplaceAll(m.Pattern, "**", "*"), ""); err != nil {
			return at + ".pattern", fmt.Sprintf("%q is not a valid glob: %v", m.Pattern, err)
		}
		if globRegexp(m.Pattern) == nil { // what Requires runs: it must hold the glob too
			return at + ".pattern", fmt.Sprintf("%q is not a valid glob", m.Pattern)
		}
	}
	return "", ""
}

// fieldValue is the value at a dotted field path ("input.a.b") of obj, as
// text: a string as it is, any other scalar in its JSON form. An object or
// an array, or no value, is not found.
func fieldValue(obj map[string]any, field string) (string, bool) {
	parts := strings.Split(strings.TrimPrefix(field, "input."), ".")
	var v any = obj
	for _, p := range parts {
		m, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		if v, ok = m[p]; !ok {
			return "", false
		}
	}
	switch x := v.(type) {
	case string:
		return x, true
	case map[string]any, []any, nil:
		return "", false
	default:
		b, _ := json.Marshal(x)
		return string(b), true
	}
}

// globMatch matches s against a glob: path.Match's syntax, where "*" does
// not cross a "/", plus "**", which does. It runs in time linear in s (see
// globRegexp).
func globMatch(pattern, s string) bool {
	re := globRegexp(pattern)
	return re != nil && re.MatchString(s)
}
