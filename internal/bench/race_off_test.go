//go:build !race

package bench

// raceDetector reports whether the test binary was built with -race, which
// makes allocation counts meaningless (its sync.Pool drops pooled objects
// at random, and it allocates for its own bookkeeping).
const raceDetector = false
