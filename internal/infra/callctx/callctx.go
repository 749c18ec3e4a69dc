// Package callctx holds the context key under which a worker's handler
// context carries the call it runs. The worker's own context type answers
// the key in its Value method, so a call's context needs no context value
// of its own; pkg/tools reads the call's CallInfo and progress reporter
// through it (tools.CallInfoFrom, tools.ReportProgress). Being internal,
// the key adds no name to the public API.
package callctx

// Key is the context key whose value is the running call: a value with
// the methods CallInfo() tools.CallInfo and ReportProgress(tools.Progress).
type Key struct{}
