package backlog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

// consumerReading is one tool's consumer as read from the server.
type consumerReading struct {
	tool        string
	queued      uint64
	running     int
	delivered   uint64 // the consumer's deliveries so far (redeliveries included)
	deliveredAt uint64 // the stream sequence of the last delivery
	paused      *time.Time
}

// readConsumers lists the tools' consumers on TOOL_CALLS.
func readConsumers(ctx context.Context, calls js.Stream) ([]consumerReading, error) {
	var out []consumerReading
	lister := calls.ListConsumers(ctx)
	for info := range lister.Info() {
		tool, ok := strings.CutPrefix(info.Name, jetstream.ConsumerPrefix)
		if !ok || tool == "" {
			continue
		}
		r := consumerReading{tool: tool, queued: info.NumPending, running: info.NumAckPending,
			delivered: info.Delivered.Consumer, deliveredAt: info.Delivered.Stream}
		if info.Paused && info.Config.PauseUntil != nil {
			until := *info.Config.PauseUntil
			r.paused = &until
		}
		out = append(out, r)
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("backlog: consumers of %s: %w", jetstream.StreamCalls, err)
	}
	return out, nil
}

// oldestQueued returns when the oldest undelivered call of tool was
// stored: the first message of its subject after the consumer's last
// delivery (one message get). Zero when there is none any more (it was
// delivered meanwhile).
func oldestQueued(ctx context.Context, calls js.Stream, tool string, after uint64) (time.Time, error) {
	msg, err := calls.GetMsg(ctx, after+1, js.WithGetMsgSubject(jetstream.CallSubject(tool)))
	if errors.Is(err, js.ErrMsgNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("backlog: oldest queued call of %s: %w", tool, err)
	}
	return msg.Time, nil
}

// progress is what the monitor remembers of a tool between readings, to
// tell a stall.
type progress struct {
	delivered uint64    // the consumer's deliveries at the last reading
	movedAt   time.Time // when a delivery or a result was last seen (or first reading)
}

// reading is one read of the fleet's backlog, before it is judged.
type reading struct {
	at      time.Time
	tools   []ToolBacklog
	byTool  map[string]*ToolBacklog
	deliver map[string]uint64
}

// read reads every tool's backlog: its consumer, its oldest queued call,
// its live workers and the calls the schedulers hold.
func (m *Monitor) read(ctx context.Context, now time.Time) (*reading, error) {
	calls, err := m.cfg.JetStream.Stream(ctx, jetstream.StreamCalls)
	if err != nil {
		return nil, fmt.Errorf("backlog: stream %s: %w", jetstream.StreamCalls, err)
	}
	cons, err := readConsumers(ctx, calls)
	if err != nil {
		return nil, err
	}
	rd := &reading{at: now, byTool: map[string]*ToolBacklog{}, deliver: map[string]uint64{}}
	get := func(tool string) *ToolBacklog {
		b := rd.byTool[tool]
		if b == nil {
			b = &ToolBacklog{Tool: tool, At: now, Workers: -1}
			rd.byTool[tool] = b
		}
		return b
	}
	var errs []error
	for _, c := range cons {
		b := get(c.tool)
		b.Queued, b.Running, b.PausedUntil = c.queued, c.running, c.paused
		rd.deliver[c.tool] = c.delivered
		if c.queued == 0 {
			continue
		}
		at, err := oldestQueued(ctx, calls, c.tool, c.deliveredAt)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !at.IsZero() {
			b.OldestAge = max(now.Sub(at), 0)
		}
	}
	m.readWorkers(ctx, rd.byTool, get)
	if m.cfg.Snapshot != nil {
		for _, ts := range m.cfg.Snapshot().Tools {
			if ts.Waiting > 0 || rd.byTool[ts.Tool] != nil {
				get(ts.Tool).Waiting = ts.Waiting
			}
		}
	}
	for _, tool := range slices.Sorted(maps.Keys(rd.byTool)) {
		rd.tools = append(rd.tools, *rd.byTool[tool])
	}
	rd.byTool = nil
	return rd, errors.Join(errs...)
}

// readWorkers counts the live workers of every tool (and adds the tools
// that have workers and no consumer yet).
func (m *Monitor) readWorkers(ctx context.Context, byTool map[string]*ToolBacklog, get func(string) *ToolBacklog) {
	if m.cfg.Live == nil {
		return
	}
	for _, tool := range m.cfg.Live.Names(ctx) {
		get(tool)
	}
	for tool, b := range byTool {
		b.Workers = len(m.cfg.Live.Workers(ctx, tool))
	}
}
