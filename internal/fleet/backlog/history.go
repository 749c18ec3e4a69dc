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
	slots   []*slotAcc // oldest first, one per slot
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
			Description: "toolpool: the fleet's state every 10 seconds (the console's charts), one sample per orchestrator and slot",
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

// msgID is the message id of one orchestrator's sample of a slot: a
// publish retried is stored once.
func msgID(start time.Time, instance string) string {
	return "hist-" + strconv.FormatInt(start.Unix(), 10) + "-" + instance
}

// wireSample is what one orchestrator writes for one slot: its own
// results, and the fleet's backlog as it read it at the slot's end.
type wireSample struct {
	At        time.Time  `json:"at"`
	Every     int64      `json:"every_s"`
	Instance  string     `json:"instance"`
	Tools     []wireTool `json:"tools"`
	Truncated int        `json:"truncated,omitempty"`
}

// wireRates are one orchestrator's results of a tool in a slot.
type wireRates struct {
	Results int            `json:"results,omitempty"`
	Errors  map[string]int `json:"errors,omitempty"`
	// Exec is the execution times' histogram: (bucket, count) pairs.
	Exec [][2]uint32 `json:"exec,omitempty"`
}

// wireTool is one tool in a wireSample.
type wireTool struct {
	Tool string `json:"tool"`
	wireRates
	Queued    uint64        `json:"queued"`
	Running   int           `json:"running"`
	Waiting   int           `json:"waiting"`
	OldestAge time.Duration `json:"oldest_age_ns,omitempty"`
	State     State         `json:"state"`
}

// publish writes this orchestrator's sample of a slot.
func (h *history) publish(ctx context.Context, w wireSample) error {
	data, err := json.Marshal(w)
	if err != nil {
		return err
	}
	_, err = h.js.Publish(ctx, SubjectDefault, data, js.WithMsgID(msgID(w.At, w.Instance)), js.WithExpectStream(StreamDefault))
	return err
}

// buildWire makes this orchestrator's sample of the slot starting at
// start from the backlog read at its end and its results in the slot.
func buildWire(start time.Time, instance string, every time.Duration, tools []ToolBacklog, rates map[string]wireRates) wireSample {
	w := wireSample{At: start.UTC(), Every: int64(every / time.Second), Instance: instance}
	byTool := map[string]*wireTool{}
	for _, b := range tools {
		byTool[b.Tool] = &wireTool{Tool: b.Tool, Queued: b.Queued, Running: b.Running, Waiting: b.Waiting,
			OldestAge: b.OldestAge, State: cmp.Or(b.State, StateOK)}
	}
	for tool, r := range rates {
		wt := byTool[tool]
		if wt == nil {
			wt = &wireTool{Tool: tool, State: StateOK}
			byTool[tool] = wt
		}
		wt.wireRates = r
	}
	list := slices.Collect(maps.Values(byTool))
	if len(list) > MaxToolsPerSample { // keep the busiest
		slices.SortFunc(list, func(a, b *wireTool) int {
			return cmp.Or(cmp.Compare(uint64(b.Results)+b.Queued, uint64(a.Results)+a.Queued), cmp.Compare(a.Tool, b.Tool))
		})
		w.Truncated = len(list) - MaxToolsPerSample
		list = list[:MaxToolsPerSample]
	}
	slices.SortFunc(list, func(a, b *wireTool) int { return cmp.Compare(a.Tool, b.Tool) })
	w.Tools = make([]wireTool, 0, len(list))
	for _, wt := range list {
		w.Tools = append(w.Tools, *wt)
	}
	return w
}

// slotAcc is one slot's samples summed: every orchestrator's results, and
// the backlog of the first sample read.
type slotAcc struct {
	at        time.Time
	every     int64
	instances []string
	truncated int
	tools     map[string]*toolAcc
	built     *Sample // the Sample made of it; nil after a change
}

// toolAcc is one tool in a slotAcc.
type toolAcc struct {
	results int
	errors  map[string]int
	exec    map[int]uint32
	backlog *wireTool // the first sample's reading
}

// add sums one orchestrator's sample into the slot; a second sample of an
// instance (written again after the deduplication window) is ignored.
func (a *slotAcc) add(w *wireSample) {
	if slices.Contains(a.instances, w.Instance) || len(a.instances) >= 64 {
		return
	}
	a.instances = append(a.instances, w.Instance)
	a.truncated = max(a.truncated, w.Truncated)
	a.built = nil
	for i := range w.Tools {
		wt := &w.Tools[i]
		t := a.tools[wt.Tool]
		if t == nil {
			t = &toolAcc{backlog: wt}
			a.tools[wt.Tool] = t
		}
		t.results += wt.Results
		for class, n := range wt.Errors {
			if t.errors == nil {
				t.errors = map[string]int{}
			}
			t.errors[class] += n
		}
		for _, p := range wt.Exec {
			if int(p[0]) < histBuckets {
				if t.exec == nil {
					t.exec = map[int]uint32{}
				}
				t.exec[int(p[0])] += p[1]
			}
		}
	}
}

// sample makes the slot's Sample.
func (a *slotAcc) sample() Sample {
	if a.built != nil {
		return *a.built
	}
	secs := float64(max(a.every, 1))
	s := Sample{At: a.at, Instances: slices.Sorted(slices.Values(a.instances)), Truncated: a.truncated,
		Pool: ToolSample{State: StateOK}, Tools: make([]ToolSample, 0, len(a.tools))}
	pool := map[int]uint32{}
	for _, tool := range slices.Sorted(maps.Keys(a.tools)) {
		t := a.tools[tool]
		b := t.backlog
		ts := ToolSample{Tool: tool, CallsPerSec: float64(t.results) / secs, Queued: b.Queued, Running: b.Running,
			Waiting: b.Waiting, OldestAge: b.OldestAge, State: cmp.Or(b.State, StateOK)}
		for class, n := range t.errors {
			if ts.ErrorsPerSec == nil {
				ts.ErrorsPerSec = map[string]float64{}
			}
			ts.ErrorsPerSec[class] = float64(n) / secs
		}
		ts.P50, ts.P99 = percentiles(t.exec)
		for bucket, n := range t.exec {
			pool[bucket] += n
		}
		addTo(&s.Pool, &ts)
		s.Tools = append(s.Tools, ts)
	}
	s.Pool.P50, s.Pool.P99 = percentiles(pool)
	a.built = &s
	return s
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
	atOf := func(a *slotAcc, t time.Time) int { return a.at.Compare(t) }
	cut, _ := slices.BinarySearchFunc(h.slots, now.Add(-h.keep), atOf)
	h.slots = h.slots[cut:]
	from, _ := slices.BinarySearchFunc(h.slots, since, atOf)
	out := make([]Sample, 0, len(h.slots)-from)
	for _, a := range h.slots[from:] {
		out = append(out, a.sample())
	}
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
			if meta, err := msg.Metadata(); err == nil {
				h.lastSeq = max(h.lastSeq, meta.Sequence.Stream)
			}
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

// add sums one stored sample into its slot, unless it is malformed.
func (h *history) add(data []byte) {
	var w wireSample
	if json.Unmarshal(data, &w) != nil || w.At.IsZero() || w.Instance == "" || len(w.Tools) > MaxToolsPerSample || w.Every < 1 {
		return
	}
	i, found := slices.BinarySearchFunc(h.slots, w.At, func(a *slotAcc, t time.Time) int { return a.at.Compare(t) })
	if !found {
		h.slots = slices.Insert(h.slots, i, &slotAcc{at: w.At, every: w.Every, tools: map[string]*toolAcc{}})
	}
	h.slots[i].add(&w)
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
