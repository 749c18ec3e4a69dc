package dispatch

import "sync"

// background runs the goroutines a turn leaves behind: duplicate watches
// (duplicate.go) and the last steps of a cancellation (cancel.go). They
// start from Dispatch calls, which startstop.Base.Go does not allow (only
// from Start, or from goroutines it started, so that Stop's wait never
// races a new goroutine): background refuses new ones once closed, and
// wait returns when those it started have ended. The dispatcher closes it
// and waits for it when Stop has ended the dispatcher's life, which every
// such goroutine watches. The zero value is ready.
type background struct {
	mu      sync.Mutex
	closed  bool
	running sync.WaitGroup
}

// Go runs f on a goroutine and reports whether it did: not once closed.
func (b *background) Go(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.running.Add(1)
	go func() {
		defer b.running.Done()
		f()
	}()
	return true
}

// close refuses new goroutines.
func (b *background) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}

// wait returns once every goroutine started has returned. Call it after
// close.
func (b *background) wait() { b.running.Wait() }
