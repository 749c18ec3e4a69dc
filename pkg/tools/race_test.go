//go:build race

package tools

// raceEnabled: with the race detector, sync.Pool drops a share of what is
// put back, so code that reuses pooled buffers (regexp's matchers) allocates
// now and then; allocation counts are exact only without it.
const raceEnabled = true
