package worker

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestGoPoolReusesAndEnds(t *testing.T) {
	t.Parallel()
	p := newGoPool()
	var ran atomic.Int64
	// Sequential functions: after the first, each finds the goroutine of
	// the one before waiting (given time), so few goroutines are made.
	for range 100 {
		done := make(chan struct{})
		p.Go(func() { ran.Add(1); close(done) })
		<-done
	}
	// Nested: a function waiting for another one run by the pool.
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		p.Go(func() {
			inner := make(chan struct{})
			p.Go(func() { ran.Add(1); close(inner) })
			<-inner
			ran.Add(1)
			wg.Done()
		})
	}
	wg.Wait()
	if got := ran.Load(); got != 200 {
		t.Fatalf("%d functions ran, want 200", got)
	}
	p.close()
	p.wait() // returns only once every goroutine has ended
	done := make(chan struct{})
	p.Go(func() { close(done) }) // still works after close
	<-done
	p.wait()
}
