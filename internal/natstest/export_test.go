package natstest

import (
	"math/rand/v2"
	"testing"
)

// What FreePorts' choice depends on, for the tests.
const (
	PortRangeFile = portRangeFile
	LowPort       = lowPort
	MinSpan       = minSpan
	HaveLocks     = haveLocks
)

// LockPort is lockPort.
var LockPort = lockPort

// DefaultLockDir is the lock directory of FreePorts.
func DefaultLockDir() string { return defaultLockDir() }

// Allocator is an allocator of a test's own: its own ports handed out
// and its own lock directory.
type Allocator struct{ a *allocator }

// NewAllocator returns an allocator as FreePorts has, with the ephemeral
// range read from rangeFile and the locks in lockDir.
func NewAllocator(rangeFile, lockDir string) Allocator {
	return Allocator{newAllocator(rangeFile, lockDir)}
}

// NewAllocatorOf returns an allocator that picks at random among
// candidates, with the locks in lockDir.
func NewAllocatorOf(candidates []int, lockDir string) Allocator {
	a := &allocator{lockDir: lockDir, handed: map[int]bool{}}
	a.pick = func() int { return candidates[rand.IntN(len(candidates))] }
	return Allocator{a}
}

// Take is FreePorts on this allocator.
func (x Allocator) Take(t testing.TB, n int) []int {
	t.Helper()
	return x.a.take(t, n)
}

// PicksItself reports whether the allocator picks its ports (below the
// ephemeral range) rather than asking the kernel.
func (x Allocator) PicksItself() bool { return x.a.pick != nil }
