package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramQuantilesWithinPrecision(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		gen  func() time.Duration
	}{
		{"uniform µs", func() time.Duration { return time.Duration(rng.Int64N(1000)) * time.Microsecond }},
		{"exponential ms", func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(5*time.Millisecond)) }},
		{"tiny ns", func() time.Duration { return time.Duration(rng.Int64N(200)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h histogram
			var all []time.Duration
			for range 20000 {
				d := tc.gen()
				h.record(d)
				all = append(all, d)
			}
			slices.Sort(all)
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
				want := all[int(q*float64(len(all)+1))-1]
				got := h.quantile(q)
				if diff := float64(got - want); diff > float64(want)/60+2 || -diff > float64(want)/60+2 {
					t.Errorf("q%v = %v, want %v within 1/64", q, got, want)
				}
			}
			if h.max != all[len(all)-1] || h.quantile(1) != all[len(all)-1] {
				t.Errorf("max %v, q1 %v; want %v", h.max, h.quantile(1), all[len(all)-1])
			}
		})
	}
}

func TestHistogramMergeAndEmpty(t *testing.T) {
	t.Parallel()
	var a, b, empty histogram
	if empty.quantile(0.5) != 0 {
		t.Errorf("empty histogram's median is %v, want 0", empty.quantile(0.5))
	}
	for i := 1; i <= 100; i++ {
		a.record(time.Duration(i) * time.Millisecond)
		b.record(time.Duration(i+100) * time.Millisecond)
	}
	a.merge(&b)
	if a.n != 200 || a.max != 200*time.Millisecond {
		t.Fatalf("merged: n %d max %v", a.n, a.max)
	}
	if got := a.quantile(0.5); got < 98*time.Millisecond || got > 102*time.Millisecond {
		t.Errorf("merged median %v, want about 100ms", got)
	}
}

func TestHistIndexMonotonic(t *testing.T) {
	t.Parallel()
	prev := -1
	for v := uint64(0); v < 1<<20; v += 7 {
		i := histIndex(v)
		if i < prev {
			t.Fatalf("index of %d is %d, below the previous %d", v, i, prev)
		}
		if lo := histValue(i); v > 64 && (float64(lo) < float64(v)*0.98 || float64(lo) > float64(v)*1.02) {
			t.Fatalf("bucket %d of %d has middle %d, more than 2%% off", i, v, lo)
		}
		prev = i
	}
	if i := histIndex(^uint64(0)); i >= histBuckets {
		t.Fatalf("largest value's index %d is out of range (%d buckets)", i, histBuckets)
	}
}
