package tasks

import (
	"context"
	"sync"
)

// expiringCtx is a context whose deadline can be brought forward: after
// expire, Done is closed and Err is context.DeadlineExceeded. A turn
// dispatched under it that is handed over ends at once as at its deadline
// — its calls are not cancelled (a cancellation would cancel them
// pool-wide) and the dispatcher's drain does not wait for it — while the
// replica that adopts it collects their results.
type expiringCtx struct {
	context.Context
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	err  error
	stop func() bool
}

// newExpiringCtx returns a context that ends with parent or at expire.
func newExpiringCtx(parent context.Context) *expiringCtx {
	c := &expiringCtx{Context: parent, done: make(chan struct{})}
	c.stop = context.AfterFunc(parent, func() { c.end(parent.Err()) })
	return c
}

func (c *expiringCtx) end(err error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		close(c.done)
	})
}

// expire ends the context as its deadline would.
func (c *expiringCtx) expire() {
	c.stop()
	c.end(context.DeadlineExceeded)
}

// Done is closed when the context ended.
func (c *expiringCtx) Done() <-chan struct{} { return c.done }

// Err is why the context ended; nil before.
func (c *expiringCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
