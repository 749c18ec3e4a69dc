package backlog

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// ErrNoHistory is Range's error when the monitor keeps no history
// (Config.NoHistory, or its stream could not be bound at Start).
var ErrNoHistory = errors.New("backlog: no history (the TOOLPOOL_HISTORY stream is not available)")

// Bounds of reading the history.
const (
	rangeFresh = 2 * time.Second // Range reuses what it read this recently
	fetchBatch = 256
)

// history is the samples' stream, and what was read of it.
type history struct {
	js     js.JetStream
	stream js.Stream
	keep   time.Duration
	every  time.Duration

	mu      sync.Mutex // one read at a time
	samples []Sample   // oldest first, one per slot
	lastSeq uint64
	readAt  time.Time
}

// openHistory binds the history's stream, creating it when missing.
func openHistory(ctx context.Context, cfg Config) (*history, error) {
	j := cfg.JetStream
	st, err := j.Stream(ctx, StreamDefault)
	if errors.Is(err, js.ErrStreamNotFound) {
		st, err = j.CreateStream(ctx, js.StreamConfig{
			Name:        StreamDefault,
			Description: "toolpool: the fleet's state every 10 seconds (the console's charts), one sample per slot",
			Subjects:    []string{SubjectDefault},
			Retention:   js.LimitsPolicy,
			MaxAge:      cfg.Keep,
			MaxBytes:    historyMaxBytes,
			Discard:     js.DiscardOld,
			Storage:     js.FileStorage,
			Replicas:    cfg.Replicas,
			Duplicates:  min(2*time.Minute, cfg.Keep),
			AllowDirect: true,
		})
		if errors.Is(err, js.ErrStreamNameAlreadyInUse) {
			st, err = j.Stream(ctx, StreamDefault)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("backlog: stream %s: %w", StreamDefault, err)
	}
	return &history{js: j, stream: st, keep: cmp.Or(st.CachedInfo().Config.MaxAge, cfg.Keep), every: cfg.SampleEvery}, nil
}

// msgID is the slot's message id: every replica's sample of one slot has
// the same, and the stream keeps the first.
func msgID(start time.Time) string { return "hist-" + strconv.FormatInt(start.Unix(), 10) }

// publish writes the slot's sample (a duplicate of another replica's is
// dropped by the stream).
func (h *history) publish(ctx context.Context, s Sample) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = h.js.Publish(ctx, SubjectDefault, data, js.WithMsgID(msgID(s.At)), js.WithExpectStream(StreamDefault))
	return err
}

// rangeFrom returns the samples from since on, reading the stream's new
// ones first unless it was read within rangeFresh.
func (h *history) rangeFrom(ctx context.Context, since time.Time) ([]Sample, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	var err error
	if h.readAt.IsZero() || now.Sub(h.readAt) >= rangeFresh {
		if err = h.readNew(ctx, now); err == nil {
			h.readAt = now
		}
	}
	if h.keep > 0 {
		cut, _ := slices.BinarySearchFunc(h.samples, now.Add(-h.keep), func(s Sample, t time.Time) int { return s.At.Compare(t) })
		h.samples = h.samples[cut:]
	}
	from, _ := slices.BinarySearchFunc(h.samples, since, func(s Sample, t time.Time) int { return s.At.Compare(t) })
	out := slices.Clone(h.samples[from:])
	if err != nil {
		return out, fmt.Errorf("backlog: reading %s: %w", StreamDefault, err)
	}
	return out, nil
}

// readNew reads the samples stored after the last one read.
func (h *history) readNew(ctx context.Context, now time.Time) error {
	info, err := h.stream.Info(ctx)
	if err != nil {
		return err
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 || last <= h.lastSeq {
		return nil
	}
	cfg := js.OrderedConsumerConfig{FilterSubjects: []string{SubjectDefault}, InactiveThreshold: 10 * time.Second}
	if h.lastSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = js.DeliverByStartSequencePolicy, h.lastSeq+1
	} else {
		start := now.Add(-h.keep)
		cfg.DeliverPolicy, cfg.OptStartTime = js.DeliverByStartTimePolicy, &start
	}
	cons, err := h.js.OrderedConsumer(ctx, StreamDefault, cfg)
	if err != nil {
		return err
	}
	defer func() { // not left for the server to expire
		if info := cons.CachedInfo(); info != nil {
			_ = h.stream.DeleteConsumer(context.WithoutCancel(ctx), info.Name)
		}
	}()
	for h.lastSeq < last {
		batch, err := cons.FetchNoWait(fetchBatch)
		if err != nil {
			return err
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			h.lastSeq = max(h.lastSeq, meta.Sequence.Stream)
			h.add(msg.Data())
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if n == 0 {
			break // the rest was removed meanwhile (MaxAge)
		}
	}
	return nil
}

// add keeps one stored sample, unless it is malformed or its slot is
// already kept (a duplicate written after the deduplication window).
func (h *history) add(data []byte) {
	var s Sample
	if json.Unmarshal(data, &s) != nil || s.At.IsZero() || len(s.Tools) > MaxToolsPerSample {
		return
	}
	i, found := slices.BinarySearchFunc(h.samples, s.At, func(x Sample, t time.Time) int { return x.At.Compare(t) })
	if found {
		return
	}
	h.samples = slices.Insert(h.samples, i, s)
}

// buildSample makes the sample of the slot starting at start from the
// backlog read at its end and the results counted in it.
func buildSample(start time.Time, instance string, every time.Duration, tools []ToolBacklog, rates map[string]slotRates) Sample {
	s := Sample{At: start.UTC(), Instance: instance, Pool: ToolSample{State: StateOK}}
	byTool := map[string]*ToolSample{}
	for _, b := range tools {
		byTool[b.Tool] = &ToolSample{Tool: b.Tool, Queued: b.Queued, Running: b.Running, Waiting: b.Waiting,
			OldestAge: b.OldestAge, State: cmp.Or(b.State, StateOK)}
	}
	secs := every.Seconds()
	var all []time.Duration
	for tool, r := range rates {
		ts := byTool[tool]
		if ts == nil {
			ts = &ToolSample{Tool: tool, State: StateOK}
			byTool[tool] = ts
		}
		ts.CallsPerSec = float64(r.total) / secs
		for class, n := range r.byClass {
			if ts.ErrorsPerSec == nil {
				ts.ErrorsPerSec = map[string]float64{}
			}
			ts.ErrorsPerSec[class] = float64(n) / secs
		}
		all = append(all, r.exec...)
		ts.P50, ts.P99 = percentiles(r.exec)
	}
	s.Pool.P50, s.Pool.P99 = percentiles(all)
	list := slices.Collect(maps.Values(byTool))
	for _, ts := range list {
		addTo(&s.Pool, ts)
	}
	if len(list) > MaxToolsPerSample { // keep the busiest
		slices.SortFunc(list, func(a, b *ToolSample) int {
			return cmp.Or(cmp.Compare(b.CallsPerSec+float64(b.Queued), a.CallsPerSec+float64(a.Queued)), cmp.Compare(a.Tool, b.Tool))
		})
		s.Truncated = len(list) - MaxToolsPerSample
		list = list[:MaxToolsPerSample]
	}
	slices.SortFunc(list, func(a, b *ToolSample) int { return cmp.Compare(a.Tool, b.Tool) })
	s.Tools = make([]ToolSample, 0, len(list))
	for _, ts := range list {
		s.Tools = append(s.Tools, *ts)
	}
	return s
}

// addTo adds one tool to the pool's sums.
func addTo(pool, ts *ToolSample) {
	pool.CallsPerSec += ts.CallsPerSec
	for class, v := range ts.ErrorsPerSec {
		if pool.ErrorsPerSec == nil {
			pool.ErrorsPerSec = map[string]float64{}
		}
		pool.ErrorsPerSec[class] += v
	}
	pool.Queued += ts.Queued
	pool.Running += ts.Running
	pool.Waiting += ts.Waiting
	pool.OldestAge = max(pool.OldestAge, ts.OldestAge)
	pool.State = pool.State.Worse(ts.State)
}
