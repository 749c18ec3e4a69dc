package bench

import (
	"testing"
	"time"
)

func TestLatencyOfIsExact(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := latencyOf(ds)
	want := Latency{P50: 50, P90: 90, P99: 99, P999: 100, Max: 100}
	if got != want {
		t.Errorf("latencyOf(1..100 ms) = %+v, want %+v", got, want)
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("latencyOf sorted its argument")
	}
	if got := latencyOf(nil); got != (Latency{}) {
		t.Errorf("latencyOf(nil) = %+v", got)
	}
}

// The probe counts what runs at once per key, and forgets on reset.
func TestProbeCountsRunningPerKey(t *testing.T) {
	t.Parallel()
	p := newProbe()
	p.begin("A")
	p.begin("A")
	p.begin("B")
	p.end("A")
	p.begin("A")
	if m := p.maxima(); m["A"] != 2 || m["B"] != 1 {
		t.Errorf("maxima %v, want A=2 B=1", m)
	}
	if n := len(p.startsOf("A")); n != 3 {
		t.Errorf("%d starts of A, want 3", n)
	}
	p.reset()
	p.begin("A") // A has two running still: three now
	if m := p.maxima(); m["A"] != 3 || m["B"] != 0 {
		t.Errorf("after reset: maxima %v, want A=3 and no B", m)
	}
	if n := len(p.startsOf("A")); n != 1 {
		t.Errorf("after reset: %d starts of A, want 1", n)
	}
}

func TestNoisyConfigValidate(t *testing.T) {
	t.Parallel()
	if err := (NoisyConfig{}).withDefaults().validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, c := range map[string]NoisyConfig{
		"workers":  {Workers: -1},
		"backlog":  {Backlog: -5},
		"turn":     {Backlog: 10, BacklogTurn: 11},
		"interval": {Interval: -time.Second},
		"rate for": {RateFor: time.Second},
	} {
		if err := c.withDefaults().validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
