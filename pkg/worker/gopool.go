package worker

import (
	"sync"
	"time"
)

// goIdleTimeout is how long a goroutine of a goPool waits for more work
// before it ends.
const goIdleTimeout = 10 * time.Second

// goPool runs functions on reused goroutines: a function goes to a
// goroutine waiting for work when there is one, else to a new goroutine,
// which waits for more work once it is done and ends after goIdleTimeout
// without any, or when the pool is closed.
//
// A worker starts two goroutines per call (one processes the message, one
// runs the tool's handler). Fresh goroutines start with a small stack that
// grows, by copying, as the call goes deeper (decoding, validating, the
// NATS client); in the bench's CPU profile that growth was about 3% of
// the time. Reused goroutines keep their grown stacks. Go never blocks,
// so a function that waits for another one run by the same pool cannot
// deadlock it.
type goPool struct {
	work    chan func() // unbuffered: a send succeeds only to a waiting goroutine
	closed  chan struct{}
	once    sync.Once
	running sync.WaitGroup
}

func newGoPool() *goPool {
	return &goPool{work: make(chan func()), closed: make(chan struct{})}
}

// Go runs f on a goroutine of the pool.
func (p *goPool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		p.running.Add(1)
		go p.loop(f)
	}
}

func (p *goPool) loop(f func()) {
	defer p.running.Done()
	var idle *time.Timer
	for {
		f()
		f = nil // let it be collected while waiting
		if idle == nil {
			idle = time.NewTimer(goIdleTimeout)
		} else {
			idle.Reset(goIdleTimeout)
		}
		select {
		case f = <-p.work:
		case <-idle.C:
			return
		case <-p.closed:
			idle.Stop()
			return
		}
	}
}

// close makes the waiting goroutines end; the busy ones end when their
// function returns. Go still works after close, on new goroutines that
// end when their function returns.
func (p *goPool) close() { p.once.Do(func() { close(p.closed) }) }

// wait waits until every goroutine of the pool has ended.
func (p *goPool) wait() { p.running.Wait() }
