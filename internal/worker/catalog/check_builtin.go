package catalog

// builtinRules are the checks of a builtin entry: it has no section of its
// own, and lays the settings it gives (a description, the timeout, the
// retry settings, the limits) over those of a tool compiled into the
// binary, which keeps its own input schema and idempotency. Apply checks
// that the tool exists.
var builtinRules = backendRules{overlay: true}
