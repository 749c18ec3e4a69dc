package sched

import (
	"math"
	"time"

	"github.com/toolpool/toolpool/internal/pooltype"
)

// Limits are a tool's per-key limits (pooltype.Limits).
type Limits = pooltype.Limits

// Share is the part of l that replica rank of replicas applies: the cap
// divided among them, the remainder going to the lowest ranks, and at
// least 1 (a cap below the number of replicas is exceeded up to one call
// per replica rather than starve the replicas without a share); the rate
// and the burst divided likewise (the burst at least 1).
func Share(l Limits, replicas, rank int) Limits {
	if replicas <= 1 {
		return l
	}
	split := func(n int) int {
		s := n / replicas
		if rank < n%replicas {
			s++
		}
		return max(s, 1)
	}
	if l.Concurrency > 0 {
		l.Concurrency = split(l.Concurrency)
	}
	if l.Rate > 0 {
		l.Rate /= float64(replicas)
		l.Burst = split(l.Burst)
	}
	return l
}

// normalize fills a rate limit's defaults: Per a second, Burst the rate
// (at least 1).
func normalize(l Limits) Limits {
	l.Concurrency = max(l.Concurrency, 0)
	if l.Rate <= 0 {
		l.Rate, l.Per, l.Burst = 0, 0, 0
		return l
	}
	if l.Per <= 0 {
		l.Per = time.Second
	}
	if l.Burst <= 0 {
		l.Burst = max(int(math.Ceil(l.Rate)), 1)
	}
	return l
}
