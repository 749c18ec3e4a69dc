package backlog

import (
	"fmt"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/ops"
)

// point is the load (queued + running) of every tool at one reading, for
// the drain estimate.
type point struct {
	at   time.Time
	load map[string]uint64
}

// judge sets each tool's state, reason and drain estimate from rd, the
// readings before it and the results seen; it updates what the monitor
// remembers. The caller holds m.mu.
func (m *Monitor) judge(rd *reading) {
	now := rd.at
	seen := make(map[string]bool, len(rd.tools))
	load := make(map[string]uint64, len(rd.tools))
	for i := range rd.tools {
		b := &rd.tools[i]
		seen[b.Tool] = true
		load[b.Tool] = b.Queued + uint64(b.Running)
		moved := m.moved(b, rd.deliver[b.Tool], now)
		b.State, b.Reason = m.state(b, moved, now)
	}
	m.trend = append(m.trend, point{at: now, load: load})
	m.trimTrend(now)
	for i := range rd.tools {
		b := &rd.tools[i]
		b.Draining, b.Drain = m.drain(b, now)
	}
	for tool := range m.prog {
		if !seen[tool] {
			delete(m.prog, tool)
		}
	}
}

// moved returns when the tool's queue last moved (a delivery, a result,
// or nothing queued), as of now.
func (m *Monitor) moved(b *ToolBacklog, delivered uint64, now time.Time) time.Time {
	p, ok := m.prog[b.Tool]
	if !ok {
		p = &progress{delivered: delivered, movedAt: now}
		m.prog[b.Tool] = p
	}
	if delivered != p.delivered || b.Queued == 0 {
		p.delivered, p.movedAt = delivered, now
	}
	if last := m.res.lastResult(b.Tool); last.After(p.movedAt) {
		p.movedAt = last
	}
	return p.movedAt
}

// state judges one tool's backlog.
func (m *Monitor) state(b *ToolBacklog, moved, now time.Time) (State, string) {
	if b.Queued == 0 {
		return StateOK, ""
	}
	switch {
	case b.Workers == 0:
		return StateStalled, fmt.Sprintf("%d calls queued and no live worker serves %s", b.Queued, b.Tool)
	case b.PausedUntil != nil && now.Before(*b.PausedUntil):
		return StateStalled, fmt.Sprintf("%d calls queued and %s is paused until %s", b.Queued, b.Tool,
			b.PausedUntil.UTC().Format(time.RFC3339))
	case now.Sub(moved) >= m.cfg.StallAfter:
		return StateStalled, fmt.Sprintf("%d calls queued and nothing delivered or answered for %s", b.Queued,
			ops.Age(now.Sub(moved)))
	case b.OldestAge > m.cfg.BacklogAge:
		return StateBackingUp, fmt.Sprintf("the oldest queued call waited %s (threshold %s)", ops.Age(b.OldestAge),
			ops.Age(m.cfg.BacklogAge))
	}
	return StateOK, ""
}

// trimTrend keeps the readings of the drain window, and the last one
// before it.
func (m *Monitor) trimTrend(now time.Time) {
	cut := 0
	for i, p := range m.trend {
		if now.Sub(p.at) >= m.cfg.DrainWindow {
			cut = i
		}
	}
	m.trend = m.trend[cut:]
	if len(m.trend) > 1024 { // readings closer than usual (a busy console)
		m.trend = m.trend[len(m.trend)-1024:]
	}
}

// drain estimates when the tool's queue is empty: Queued / (completions/s
// − arrivals/s) over the drain window, where completions − arrivals is
// how fast queued + running shrank.
func (m *Monitor) drain(b *ToolBacklog, now time.Time) (bool, time.Duration) {
	if b.Queued == 0 {
		return true, 0
	}
	first := m.trend[0]
	span := now.Sub(first.at)
	if span < m.cfg.DrainWindow/3 {
		return false, 0 // too short a history to tell
	}
	then, ok := first.load[b.Tool]
	if !ok {
		return false, 0
	}
	nowLoad := b.Queued + uint64(b.Running)
	if then <= nowLoad {
		return false, 0
	}
	perSec := float64(then-nowLoad) / span.Seconds()
	est := time.Duration(float64(b.Queued) / perSec * float64(time.Second))
	return true, est.Round(time.Second)
}
