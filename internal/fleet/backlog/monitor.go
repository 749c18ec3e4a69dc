package backlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolpool/toolpool/internal/infra/startstop"
)

// ObserveResult counts a result that reached one of this orchestrator's
// callers (dispatch.Config.OnResult): its tool, its error class (empty on
// success) and the worker's execution time. It allocates nothing but for
// a tool's first result in a slot.
func (m *Monitor) ObserveResult(tool, class string, exec time.Duration) {
	m.res.add(time.Now(), tool, class, exec)
}

// ErrStopped is the cause with which Stop ends the monitor's work.
var ErrStopped = errors.New("backlog: monitor stopped")

// readTimeout bounds one reading of the backlog by the sampler.
const readTimeout = 5 * time.Second

// Monitor reads the fleet's backlog, judges it and keeps its history.
// Create it with New, then Start and Stop it. Its methods are safe for
// concurrent use.
type Monitor struct {
	startstop.Base

	cfg Config
	log *slog.Logger
	res *results
	his atomic.Pointer[history] // nil with Config.NoHistory or when the stream is unusable

	readMu sync.Mutex // one reading at a time; the others wait for it

	mu      sync.Mutex
	last    []ToolBacklog
	lastAt  time.Time
	lastErr error
	prog    map[string]*progress
	trend   []point
}

// New returns a Monitor for cfg, with defaults applied. It does not touch
// the network: Start does.
func New(cfg Config) (*Monitor, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Monitor{cfg: cfg, log: cfg.Logger.With("component", "backlog"), res: newResults(cfg.SampleEvery),
		prog: map[string]*progress{}}, nil
}

// BacklogAge is the age of the oldest queued call past which a tool is
// backing up.
func (m *Monitor) BacklogAge() time.Duration { return m.cfg.BacklogAge }

// historyOpenTimeout bounds the binding (or creation) of the history's
// stream at start.
const historyOpenTimeout = 5 * time.Second

// Start binds the history's stream (creating it when missing) and starts
// sampling. Without the stream (a server
// short of storage, a stream of another shape) the monitor runs without
// history and says so in the log: the backlog is still read.
func (m *Monitor) Start(ctx context.Context) error {
	err := m.Base.Start(ctx, func(context.Context) error {
		if !m.cfg.NoHistory {
			// Bounded on its own: a server that never answers (a user
			// not allowed the stream gets no reply) must not use up the
			// caller's start.
			octx, cancel := context.WithTimeout(ctx, historyOpenTimeout)
			h, err := openHistory(octx, m.cfg)
			cancel()
			if err != nil {
				m.log.Warn("no backlog history: the console's charts stay empty", "err", err)
			}
			if h != nil {
				m.his.Store(h)
			}
		}
		m.Go(m.loop)
		return nil
	})
	if errors.Is(err, startstop.ErrStarted) || errors.Is(err, startstop.ErrStopped) {
		return fmt.Errorf("backlog: %w", err)
	}
	return err
}

// Stop stops sampling.
func (m *Monitor) Stop(ctx context.Context) error {
	return m.Base.Stop(ctx, ErrStopped, nil)
}

// Backlog returns every tool's backlog, sorted by name: the tools with a
// consumer on TOOL_CALLS, live workers or calls held by a scheduler. A
// reading younger than FreshDefault is reused. With an error, the tools
// read are returned too (a tool whose oldest call could not be read has
// OldestAge 0).
func (m *Monitor) Backlog(ctx context.Context) ([]ToolBacklog, error) {
	if tools, err, ok := m.fresh(time.Now()); ok {
		return tools, err
	}
	m.readMu.Lock()
	defer m.readMu.Unlock()
	if tools, err, ok := m.fresh(time.Now()); ok { // read while this one waited
		return tools, err
	}
	return m.refresh(ctx, time.Now())
}

// fresh returns the last reading when it is younger than FreshDefault.
func (m *Monitor) fresh(now time.Time) ([]ToolBacklog, error, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastAt.IsZero() || now.Sub(m.lastAt) >= FreshDefault {
		return nil, nil, false
	}
	return slices.Clone(m.last), m.lastErr, true
}

// refresh reads and judges the backlog now. The caller holds m.readMu.
func (m *Monitor) refresh(ctx context.Context, now time.Time) ([]ToolBacklog, error) {
	rd, err := m.read(ctx, now)
	if rd == nil {
		m.mu.Lock()
		m.lastErr = err
		m.mu.Unlock()
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.judge(rd)
	m.last, m.lastAt, m.lastErr = rd.tools, now, err
	return slices.Clone(rd.tools), err
}

// loop samples at every slot's end until life ends.
func (m *Monitor) loop(life context.Context) {
	for {
		now := time.Now()
		end := now.Truncate(m.cfg.SampleEvery).Add(m.cfg.SampleEvery)
		t := time.NewTimer(end.Sub(now))
		select {
		case <-life.Done():
			t.Stop()
			return
		case <-t.C:
		}
		m.sample(life, end)
	}
}

// sample reads the backlog at the end of the slot that ends at end and
// writes this orchestrator's sample of the slot.
func (m *Monitor) sample(life context.Context, end time.Time) {
	ctx, cancel := context.WithTimeout(life, readTimeout)
	defer cancel()
	m.readMu.Lock()
	tools, err := m.refresh(ctx, time.Now())
	m.readMu.Unlock()
	if err != nil {
		m.log.Warn("reading the backlog failed", "err", err)
		if tools == nil {
			return
		}
	}
	start := end.Add(-m.cfg.SampleEvery)
	rates := m.res.take(start)
	his := m.his.Load()
	if his == nil {
		return
	}
	w := buildWire(start, m.cfg.Instance, m.cfg.SampleEvery, tools, rates)
	if err := his.publish(ctx, w); err != nil && life.Err() == nil {
		m.log.Warn("writing the backlog's sample failed", "slot", start, "err", err)
	}
}

// Range returns the samples of the history from since on, oldest first,
// at most one per slot. A slot without a sample is one no orchestrator
// sampled (none ran, or the stream was unreachable): a gap, not zeros.
func (m *Monitor) Range(ctx context.Context, since time.Time) ([]Sample, error) {
	his := m.his.Load()
	if his == nil {
		return nil, ErrNoHistory
	}
	return his.rangeFrom(ctx, since)
}
