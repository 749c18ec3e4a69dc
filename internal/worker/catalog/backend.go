package catalog

// backendRules is what sets one backend's entries apart in the checks: the
// section of settings of its own, what it makes of the fields every entry
// has, and the check of its section. Each backend's rules are in its own
// file (check_<backend>.go).
type backendRules struct {
	// section reports whether an entry has the backend's own section of
	// settings; nil for a backend without one (builtin).
	section func(s *toolSpec) bool
	// defines says an entry defines the whole tool (webhook, exec): its
	// description and input_schema are required, and the tool must pass
	// the registry's own checks.
	defines bool
	// overlay says an entry adjusts a tool compiled into the binary
	// (builtin): its retry settings are checked as an overlay, and its
	// input_schema and idempotency are the tool's code's.
	overlay bool
	// refuse names a field every entry may have that the backend's
	// entries must not, and why, or returns "".
	refuse func(s *toolSpec) (field, reason string)
	// check checks the backend's section into e and names the faulty
	// field by its path from the entry ("webhook.url"); nil when there is
	// nothing to check.
	check func(p *parser, e *Entry, s *toolSpec) (field string, err error)
}

// backendRulesOf are the rules of every backend.
var backendRulesOf = map[Backend]backendRules{
	BackendWebhook: webhookRules,
	BackendExec:    execRules,
	BackendBuiltin: builtinRules,
	BackendMCP:     mcpRules,
}

// sectionBackends are the backends with a section of their own, in the
// order an entry's stray sections are reported.
var sectionBackends = []Backend{BackendWebhook, BackendExec, BackendMCP}
