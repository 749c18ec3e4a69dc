package pooltype

import (
	"context"

	"github.com/toolpool/toolpool/pkg/tools"
)

// ToolInfo is what the dispatcher knows of a tool it may call.
type ToolInfo struct {
	Name string
	// NoWorker, set by a Lookup that answers false, says the tool is known
	// but no live worker serves it right now: the call is answered with
	// classify.NoWorkerMessage instead of the unknown-tool message.
	NoWorker bool
	// Slots is how many of the tool's calls the live fleet runs at once:
	// the lesser of the tool's Concurrency and the sum of its live
	// workers' slots. 0: not known; the dispatcher then publishes calls as
	// they come, without a fair-share window.
	Slots int
	// Fairness is the tool's fairness key (tools.Tool.Fairness; "" means
	// tools.FairnessTenant).
	Fairness string
	// PerKey are the tool's limits per fairness key (tools.Tool.PerKey).
	PerKey tools.KeyLimits
	// Cost, Cache and Approval are the tool's (tools.Tool's): what a call
	// spends of a budget (0 means 1), its result cache and its approval
	// rule (nil: none). The orchestrator's policy gate applies them before
	// the dispatcher sees the call.
	Cost     int
	Cache    *tools.CachePolicy
	Approval *tools.ApprovalRule
	// Version identifies the tool's implementation as its workers announce
	// it (their build and the tool's definition): a cached result is only
	// shared between calls of the same version.
	Version string
}

// Catalog says which tools exist right now.
type Catalog interface {
	// Lookup reports whether a tool is served.
	Lookup(ctx context.Context, name string) (ToolInfo, bool)
	// Names lists the tools served, sorted.
	Names(ctx context.Context) []string
}
