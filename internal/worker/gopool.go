package worker

import "sync"

// goPool runs functions on reused goroutines: a function goes to a
// goroutine waiting for work when there is one, else to a new goroutine,
// which waits for more work once it is done, until the pool is closed.
//
// A worker starts two goroutines per call (one processes the message, one
// runs the tool's handler). Fresh goroutines start with a small stack that
// grows, by copying, as the call goes deeper (decoding, validating, the
// NATS client); reused goroutines keep their grown stacks. Go never
// blocks, so a function that waits for another one run by the same pool
// cannot deadlock it.
//
// The pool holds as many goroutines as were ever busy at once: at most
// two per concurrency slot, plus handlers still running after their call
// was abandoned. Idle goroutines wait on channels only, without a timer:
// a timer armed or reset per call would cost more than the stack growth
// the pool saves. The garbage collector shrinks their stacks when they
// stay idle.
type goPool struct {
	work    chan task // unbuffered: a send succeeds only to a waiting goroutine
	closed  chan struct{}
	once    sync.Once
	running sync.WaitGroup
}

// task is work for the pool. A pointer to a task kept in a longer-lived
// struct (a job's) costs no allocation, where a closure would.
type task interface{ runTask() }

// funcTask is a func as a task.
type funcTask func()

func (f funcTask) runTask() { f() }

func newGoPool() *goPool {
	return &goPool{work: make(chan task), closed: make(chan struct{})}
}

// Go runs f on a goroutine of the pool.
func (p *goPool) Go(f func()) { p.Run(funcTask(f)) }

// Run runs t on a goroutine of the pool.
func (p *goPool) Run(t task) {
	select {
	case p.work <- t:
	default:
		p.running.Add(1)
		go p.loop(t)
	}
}

func (p *goPool) loop(t task) {
	defer p.running.Done()
	for {
		t.runTask()
		t = nil // let it be collected while waiting
		select {
		case t = <-p.work:
		case <-p.closed:
			return
		}
	}
}

// close makes the waiting goroutines end; the busy ones end when their
// function returns. Go still works after close, on new goroutines that
// end when their function returns.
func (p *goPool) close() { p.once.Do(func() { close(p.closed) }) }

// wait waits until every goroutine of the pool has ended, the busy ones
// included: a handler that ignores cancellation can hold it forever, so
// Stop does not wait (tests do).
func (p *goPool) wait() { p.running.Wait() }
