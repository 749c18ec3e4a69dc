// Package pooltype holds the words the sides of the pool share without
// importing each other: what the orchestrator knows of a tool
// (ToolInfo, Catalog), a scheduler's snapshot (Snapshot and its parts,
// Merge), and the events the worker side and the fleet's watchers report
// to metrics (WorkerEvent, PoisonCall). It imports only the public
// packages pkg/classify, pkg/envelope and pkg/tools, so that the worker
// side, the orchestrator side, the front doors and the metrics can all
// name these types (river keeps its shared types in rivertype the same
// way).
package pooltype
