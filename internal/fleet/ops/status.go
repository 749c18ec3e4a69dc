package ops

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/jetstream"
)

// ToolStatus is one tool's state across the fleet.
type ToolStatus struct {
	Tool string `json:"tool"`
	// Consumer says the tool has its durable consumer tool_<tool> on
	// TOOL_CALLS (some worker served it once). The counters below are
	// zero without one.
	Consumer bool `json:"consumer"`
	// Pending is the calls queued and not yet delivered to any worker.
	Pending uint64 `json:"pending"`
	// InFlight is the calls delivered and not yet acknowledged: running,
	// or waiting for their retry after a NAK with delay.
	InFlight int `json:"in_flight"`
	// Redelivered is the calls in flight delivered more than once.
	Redelivered int `json:"redelivered"`
	// DeadLetters is the tool's dead letters in TOOL_DLQ.
	DeadLetters uint64 `json:"dead_letters"`
	// PausedUntil is set while the tool's consumer is paused (after a
	// rate limit, or by an operator): no worker gets its calls until then.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	// Workers are the ids of the live workers serving the tool.
	Workers []string `json:"workers"`
}

// Paused reports whether the tool is paused at now.
func (s ToolStatus) Paused(now time.Time) bool {
	return s.PausedUntil != nil && now.Before(*s.PausedUntil)
}

// WorkerSource tells which workers serve a tool; *discovery.Catalog is one.
type WorkerSource interface {
	Names(ctx context.Context) []string
	Workers(ctx context.Context, tool string) []discovery.Announcement
}

// Status returns the state of every tool that has a consumer, dead
// letters or a live worker, sorted by name. live may be nil (no worker
// column).
func Status(ctx context.Context, j js.JetStream, live WorkerSource) ([]ToolStatus, error) {
	byTool := map[string]*ToolStatus{}
	get := func(tool string) *ToolStatus {
		s, ok := byTool[tool]
		if !ok {
			s = &ToolStatus{Tool: tool, Workers: []string{}}
			byTool[tool] = s
		}
		return s
	}

	calls, err := j.Stream(ctx, jetstream.StreamCalls)
	if err != nil {
		return nil, fmt.Errorf("ops: stream %s: %w", jetstream.StreamCalls, err)
	}
	lister := calls.ListConsumers(ctx)
	for info := range lister.Info() {
		tool, ok := strings.CutPrefix(info.Name, jetstream.ConsumerPrefix)
		if !ok || tool == "" {
			continue
		}
		s := get(tool)
		s.Consumer = true
		s.Pending, s.InFlight, s.Redelivered = info.NumPending, info.NumAckPending, info.NumRedelivered
		if info.Paused && info.Config.PauseUntil != nil {
			until := *info.Config.PauseUntil
			s.PausedUntil = &until
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("ops: consumers of %s: %w", jetstream.StreamCalls, err)
	}

	dlqStream, err := j.Stream(ctx, jetstream.StreamDLQ)
	if err != nil {
		return nil, fmt.Errorf("ops: stream %s: %w", jetstream.StreamDLQ, err)
	}
	counts, err := dlq.Counts(ctx, dlqStream)
	if err != nil {
		return nil, err
	}
	for tool, n := range counts {
		get(tool).DeadLetters = n
	}

	if live != nil {
		for _, tool := range live.Names(ctx) {
			get(tool)
		}
		for tool, s := range byTool {
			for _, a := range live.Workers(ctx, tool) {
				s.Workers = append(s.Workers, a.WorkerID)
			}
		}
	}

	out := make([]ToolStatus, 0, len(byTool))
	for _, tool := range slices.Sorted(maps.Keys(byTool)) {
		out = append(out, *byTool[tool])
	}
	return out, nil
}
