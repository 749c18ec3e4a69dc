package sched

import "github.com/toolpool/toolpool/internal/pooltype"

// The scheduler's snapshot types are shared words (package pooltype): the
// metrics, the console and `status --by-key` read them without importing
// the scheduler.
type (
	// Snapshot is one scheduler's state (pooltype.Snapshot).
	Snapshot = pooltype.Snapshot
	// ToolStats is one tool's part of a Snapshot (pooltype.ToolStats).
	ToolStats = pooltype.ToolStats
	// KeyStats is one fairness key's part of a ToolStats (pooltype.KeyStats).
	KeyStats = pooltype.KeyStats
	// Limits are a tool's per-key limits (pooltype.Limits).
	Limits = pooltype.Limits
)

// OtherKey is the key under which the keys beyond a snapshot's bound are
// summed (pooltype.OtherKey).
const OtherKey = pooltype.OtherKey

// Merge sums the snapshots of several replicas (pooltype.Merge).
func Merge(snaps []Snapshot) Snapshot { return pooltype.Merge(snaps) }
