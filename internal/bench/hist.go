package bench

import (
	"math/bits"
	"sync"
	"time"
)

// A histogram of durations with log-linear buckets: exact below 64 ns, then
// 64 buckets per power of two, so every quantile is within 1/64 (1.6%) of
// the true value. Recording is a few instructions and never allocates;
// each agent keeps its own and they are merged at the end.
const (
	histSubBits = 6
	histSub     = 1 << histSubBits
	histBuckets = histSub + (64-histSubBits)*histSub
)

type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    time.Duration
}

func histIndex(v uint64) int {
	if v < histSub {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1
	return histSub + shift*histSub + int(v>>uint(shift)) - histSub
}

// histValue is the middle of bucket i.
func histValue(i int) uint64 {
	if i < histSub {
		return uint64(i)
	}
	shift := (i - histSub) / histSub
	top := uint64(histSub + (i-histSub)%histSub)
	return top<<uint(shift) + (uint64(1)<<uint(shift))/2
}

func (h *histogram) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histIndex(uint64(d))]++
	h.n++
	if d > h.max {
		h.max = d
	}
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (0 < q <= 1) of the recorded durations,
// 0 when there are none. The maximum is exact.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	if rank == h.n {
		return h.max
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(histValue(i)), h.max)
		}
	}
	return h.max
}

// histShards is the number of histograms the agents share; each agent
// records into one, under its lock.
const histShards = 16

type histShard struct {
	mu sync.Mutex
	h  histogram
	_  [64]byte
}

func (s *histShard) record(d time.Duration) {
	s.mu.Lock()
	s.h.record(d)
	s.mu.Unlock()
}
