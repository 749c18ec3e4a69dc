package backlog

import (
	"testing"
	"time"
)

func testMonitor() *Monitor {
	cfg := Config{}.WithDefaults()
	return &Monitor{cfg: cfg, res: newResults(cfg.SampleEvery), prog: map[string]*progress{}}
}

// judgeAt reads tool's backlog at at with queued and running calls, and
// delivered deliveries so far.
func judgeAt(m *Monitor, at time.Time, queued uint64, running int, delivered uint64) ToolBacklog {
	rd := &reading{at: at, tools: []ToolBacklog{{Tool: "t", At: at, Queued: queued, Running: running, Workers: 1}},
		deliver: map[string]uint64{"t": delivered}}
	m.judge(rd)
	return rd.tools[0]
}

// The drain estimate: Queued / (completions/s − arrivals/s) over the
// last minute, from how fast queued + running shrank.
func TestDrainEstimate(t *testing.T) {
	m := testMonitor()
	t0 := time.Unix(1_800_000_000, 0)
	if b := judgeAt(m, t0, 100, 10, 0); b.Draining {
		t.Errorf("draining at the first reading: %+v", b)
	}
	// 10 s later: 90 + 10, shrinking 1/s, but too short a span to tell.
	if b := judgeAt(m, t0.Add(10*time.Second), 90, 10, 10); b.Draining {
		t.Errorf("draining after 10s: %+v", b)
	}
	// 30 s after the first: 70 + 10: shrank by 30 in 30 s, 1/s: 70 s left.
	if b := judgeAt(m, t0.Add(30*time.Second), 70, 10, 30); !b.Draining || b.Drain != 70*time.Second {
		t.Errorf("after 30s: %+v, want draining in 70s", b)
	}
	// Arrivals outpace completions: growing, not draining.
	m2 := testMonitor()
	judgeAt(m2, t0, 10, 2, 0)
	if b := judgeAt(m2, t0.Add(40*time.Second), 50, 2, 40); b.Draining {
		t.Errorf("growing backlog: %+v, want not draining", b)
	}
	// The window slides: 90 s on, the rate is over the last minute.
	m3 := testMonitor()
	for i := range 10 {
		judgeAt(m3, t0.Add(time.Duration(i)*10*time.Second), uint64(200-i*20), 0, uint64(i))
	}
	// At 90 s: 20 queued; 60 s before (30 s): 140: 120 in 60 s, 2/s: 10 s.
	if b := judgeAt(m3, t0.Add(90*time.Second), 20, 0, 9); !b.Draining || b.Drain != 10*time.Second {
		t.Errorf("sliding window: %+v, want draining in 10s", b)
	}
}

// A stall needs calls queued and nothing moving for StallAfter; a result
// or a delivery counts as moving.
func TestStallNeedsNothingMoving(t *testing.T) {
	m := testMonitor()
	t0 := time.Now()
	judgeAt(m, t0, 5, 0, 7)
	if b := judgeAt(m, t0.Add(StallAfterDefault-time.Second), 5, 0, 7); b.State != StateOK {
		t.Errorf("before StallAfter: %+v", b)
	}
	m.res.add(t0.Add(StallAfterDefault-time.Second), "t", "", time.Millisecond) // a result came
	if b := judgeAt(m, t0.Add(StallAfterDefault+time.Second), 5, 0, 7); b.State != StateOK {
		t.Errorf("a result %v ago: %+v", 2*time.Second, b)
	}
	if b := judgeAt(m, t0.Add(2*StallAfterDefault), 5, 0, 7); b.State != StateStalled {
		t.Errorf("nothing for StallAfter: %+v, want stalled", b)
	}
	if b := judgeAt(m, t0.Add(2*StallAfterDefault+time.Second), 5, 0, 8); b.State != StateOK {
		t.Errorf("a delivery: %+v, want ok", b)
	}
}

// A sample over the cap keeps the busiest tools and says how many it left
// out; two orchestrators' samples of a slot add up: their results summed,
// the percentiles over both, the backlog read once.
func TestSamplesAddUp(t *testing.T) {
	var tools []ToolBacklog
	for i := range MaxToolsPerSample + 5 {
		tools = append(tools, ToolBacklog{Tool: string(rune('a'+i%26)) + string(rune('a'+i/26)), Queued: uint64(i) + 1, State: StateOK})
	}
	tools[len(tools)-1].State = StateStalled
	start := time.Unix(1_800_000_000, 0)
	ra := newResults(SampleEvery)
	for i := range 10 {
		ra.add(start, "echo", "", time.Duration(i+1)*time.Millisecond)
	}
	ra.add(start, "echo", "timeout", time.Second)
	rb := newResults(SampleEvery)
	for range 9 {
		rb.add(start.Add(time.Second), "echo", "", 100*time.Millisecond)
	}
	wa := buildWire(start, "orch-a", SampleEvery, tools, ra.take(start))
	wb := buildWire(start, "orch-b", SampleEvery, tools[:3], rb.take(start))
	if len(wa.Tools) != MaxToolsPerSample || wa.Truncated != 6 {
		t.Fatalf("%d tools, %d truncated", len(wa.Tools), wa.Truncated)
	}
	acc := &slotAcc{at: start, every: 10, tools: map[string]*toolAcc{}}
	acc.add(&wa)
	acc.add(&wb)
	acc.add(&wb) // written again: once
	s := acc.sample()
	if len(s.Instances) != 2 || s.Pool.State != StateStalled {
		t.Errorf("instances %v, pool state %s", s.Instances, s.Pool.State)
	}
	var echo ToolSample
	for _, ts := range s.Tools {
		if ts.Tool == "echo" {
			echo = ts
		}
	}
	if echo.CallsPerSec != 2 || echo.ErrorsPerSec["timeout"] != 0.1 || s.Pool.CallsPerSec != 2 {
		t.Errorf("echo %+v, pool %+v", echo, s.Pool)
	}
	// 20 times: 1..10 ms, nine of 100 ms, 1 s: p50 is the 10th, 10 ms
	// (its bucket's top), p99 is 1 s.
	if echo.P50 < 10*time.Millisecond || echo.P50 > 12*time.Millisecond || echo.P99 < time.Second || echo.P99 > 1200*time.Millisecond {
		t.Errorf("p50 %v p99 %v", echo.P50, echo.P99)
	}
	for i := 1; i < len(s.Tools); i++ {
		if s.Tools[i-1].Tool >= s.Tools[i].Tool {
			t.Fatalf("tools not sorted: %s, %s", s.Tools[i-1].Tool, s.Tools[i].Tool)
		}
	}
}

// Counting a result of a tool already counted in the slot allocates
// nothing: it is on the path of every result.
func TestCountingAllocatesNothing(t *testing.T) {
	r := newResults(time.Hour)
	now := time.Now()
	r.add(now, "echo", "transient", time.Millisecond)
	if n := testing.AllocsPerRun(1000, func() { r.add(now, "echo", "transient", time.Millisecond) }); n != 0 {
		t.Errorf("%v allocations per result", n)
	}
}
