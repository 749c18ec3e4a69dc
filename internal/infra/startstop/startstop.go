// Package startstop is the one lifecycle every long-lived component of the
// pool embeds: a worker, a dispatcher, a watcher, a front door, the
// assembled Server and Orchestrator. It solves once what each of them
// would otherwise solve again: Start twice, Stop before Start, Stop while
// Start runs, Stop twice or from two goroutines, goroutines that must end
// before Stop returns, and the two stages of a shutdown: drain (work in
// progress may finish until the ctx given to Stop ends), then cancel what
// is left with a cause that says why.
//
// A component embeds a Base and writes its Start and Stop over it:
//
//	type Watcher struct {
//		startstop.Base
//		…
//	}
//
//	func (w *Watcher) Start(ctx context.Context) error {
//		return w.Base.Start(ctx, func(life context.Context) error {
//			sub, err := w.subscribe(ctx)  // bounded by Start's ctx
//			if err != nil {
//				return err
//			}
//			w.Go(func(life context.Context) { w.loop(life, sub) })
//			return nil
//		})
//	}
//
//	func (w *Watcher) Stop(ctx context.Context) error {
//		return w.Base.Stop(ctx, ErrWatcherStopped, w.drain)
//	}
//
// life is the component's own context: it outlives Start's ctx (which
// only bounds the start) and is cancelled, with the cause given to Stop,
// once the drain is over. The goroutines started with Go receive it, and
// Stop returns only after all of them have returned.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// ErrStarted is returned by a second Start.
var ErrStarted = errors.New("already started")

// ErrStopped is returned by a Start that comes after Stop, and is the
// cause of the life of a component stopped without a cause of its own.
var ErrStopped = errors.New("stopped")

// Base is a component's lifecycle. The zero value is ready: a component
// embeds it (by value) and never copies it after first use.
type Base struct {
	initOnce sync.Once
	// startDone is closed when the start func returned (or at once by a
	// Stop that came first); stopped when Stop is over.
	startDone chan struct{}
	stopped   chan struct{}

	mu           sync.Mutex
	startCalled  bool
	stopCalled   bool
	startErr     error // read after startDone is closed
	stopErr      error // read after stopped is closed
	life         context.Context
	cancel       context.CancelCauseFunc
	goroutines   sync.WaitGroup
	runningState bool
}

func (b *Base) init() {
	b.initOnce.Do(func() {
		b.startDone = make(chan struct{})
		b.stopped = make(chan struct{})
	})
}

// Start runs start once, with the component's life: a context that is
// not cancelled when ctx is (ctx bounds the start only: its requests
// should use ctx) and that Stop cancels, with its cause, after the drain.
// A start that fails cancels the life with its error; the component may
// then be stopped (Stop returns nil at once) but not started again. A
// second Start returns ErrStarted, a Start after Stop ErrStopped.
func (b *Base) Start(ctx context.Context, start func(life context.Context) error) error {
	b.init()
	b.mu.Lock()
	switch {
	case b.stopCalled:
		b.mu.Unlock()
		return ErrStopped
	case b.startCalled:
		b.mu.Unlock()
		return ErrStarted
	}
	b.startCalled = true
	b.life, b.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	life := b.life
	b.mu.Unlock()

	err := ctx.Err()
	if err == nil {
		err = start(life)
	}
	b.mu.Lock()
	b.startErr = err
	b.runningState = err == nil
	b.mu.Unlock()
	if err != nil {
		b.cancel(err)
	}
	close(b.startDone)
	return err
}

// Go runs f in a goroutine with the component's life; Stop returns only
// after f has. Call it from the start func or from a goroutine that Go
// started (so that Stop's wait never races a new goroutine); a Go before
// Start runs f with a life that is already over.
func (b *Base) Go(f func(life context.Context)) {
	b.goroutines.Add(1)
	life := b.Life()
	go func() {
		defer b.goroutines.Done()
		f(life)
	}()
}

// Stop stops the component once, in two stages: drain(ctx), which stops
// taking work and lets what is in progress finish until ctx ends; then the
// life is cancelled with cause (ErrStopped when nil) and Stop waits for
// the goroutines started with Go. A Stop while Start runs cancels the life
// at once and waits for Start to return, then stops what it started. A
// Stop before Start returns nil; a second Stop, or one from another
// goroutine, waits for the first and returns its error. drain may be nil.
func (b *Base) Stop(ctx context.Context, cause error, drain func(ctx context.Context) error) error {
	b.init()
	if cause == nil {
		cause = ErrStopped
	}
	b.mu.Lock()
	if b.stopCalled {
		b.mu.Unlock()
		<-b.stopped
		return b.stopErr
	}
	b.stopCalled = true
	started := b.startCalled
	cancel := b.cancel
	b.mu.Unlock()

	var err error
	if started {
		select {
		case <-b.startDone:
		default:
			// Stop during Start: end the start's waits, then let it return.
			cancel(cause)
			<-b.startDone
		}
		b.mu.Lock()
		ok := b.startErr == nil
		b.runningState = false
		b.mu.Unlock()
		if ok && drain != nil {
			err = drain(ctx)
		}
		cancel(cause)
		b.goroutines.Wait()
	} else {
		close(b.startDone)
	}
	b.stopErr = err
	close(b.stopped)
	return err
}

// Stopped is closed once Stop has returned.
func (b *Base) Stopped() <-chan struct{} {
	b.init()
	return b.stopped
}

// Running reports whether Start succeeded and Stop has not begun.
func (b *Base) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runningState
}

// Life is the component's context (see Start): cancelled with Stop's
// cause after the drain, or with the start's error. Before Start it is a
// context that is already over.
func (b *Base) Life() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.life == nil {
		return notStarted
	}
	return b.life
}

// Stopping is closed once the component's life ends: Stop's drain is over
// (or the start failed). Loops select on it to end.
func (b *Base) Stopping() <-chan struct{} { return b.Life().Done() }

var notStarted = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errNotStarted)
	return ctx
}()

var errNotStarted = errors.New("not started")
