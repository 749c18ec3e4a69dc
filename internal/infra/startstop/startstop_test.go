package startstop_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/infra/startstop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errWatcherStopped = errors.New("watcher stopped")

// watcher is a component as the pool writes them: a loop that runs until
// its life ends, and a drain that waits for in-flight work.
type watcher struct {
	startstop.Base
	started  chan struct{} // closed by the start func
	release  chan struct{} // the start func waits for it when non-nil
	loopErr  atomic.Value  // the cause the loop saw
	drained  atomic.Bool
	startErr error
}

func (w *watcher) Start(ctx context.Context) error {
	return w.Base.Start(ctx, func(life context.Context) error {
		if w.started != nil {
			close(w.started)
		}
		if w.release != nil {
			select {
			case <-w.release:
			case <-life.Done():
				return context.Cause(life)
			}
		}
		if w.startErr != nil {
			return w.startErr
		}
		w.Go(func(life context.Context) {
			<-life.Done()
			w.loopErr.Store(context.Cause(life))
		})
		return nil
	})
}

func (w *watcher) Stop(ctx context.Context) error {
	return w.Base.Stop(ctx, errWatcherStopped, func(context.Context) error {
		w.drained.Store(true)
		return nil
	})
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	w := &watcher{}
	if w.Running() {
		t.Fatal("running before Start")
	}
	if err := w.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if !w.Running() {
		t.Fatal("not running after Start")
	}
	if err := w.Start(ctx(t)); !errors.Is(err, startstop.ErrStarted) {
		t.Fatalf("second Start = %v, want ErrStarted", err)
	}
	select {
	case <-w.Stopped():
		t.Fatal("Stopped closed before Stop")
	default:
	}
	if err := w.Stop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	<-w.Stopped()
	if !w.drained.Load() {
		t.Error("Stop did not drain")
	}
	if got := w.loopErr.Load(); got != errWatcherStopped {
		t.Errorf("the loop ended with %v, want the named cause", got)
	}
	if w.Running() {
		t.Error("running after Stop")
	}
	if err := w.Start(ctx(t)); !errors.Is(err, startstop.ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
}

func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	w := &watcher{}
	if err := w.Stop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	<-w.Stopped()
	if w.drained.Load() {
		t.Error("a component never started was drained")
	}
	if err := w.Start(ctx(t)); !errors.Is(err, startstop.ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
	if err := w.Life().Err(); err == nil {
		t.Error("the life of a component never started is not over")
	}
}

// TestStopDuringStart: a Stop while Start waits ends the start's wait
// through its life, waits for Start to return and stops nothing more.
func TestStopDuringStart(t *testing.T) {
	t.Parallel()
	w := &watcher{started: make(chan struct{}), release: make(chan struct{})}
	startErr := make(chan error, 1)
	go func() { startErr <- w.Start(ctx(t)) }()
	<-w.started
	if err := w.Stop(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-startErr; !errors.Is(err, errWatcherStopped) {
		t.Errorf("Start interrupted by Stop = %v, want the stop cause", err)
	}
	if w.drained.Load() {
		t.Error("a start that failed was drained")
	}
	<-w.Stopped()
}

func TestStartFails(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	w := &watcher{startErr: boom}
	if err := w.Start(ctx(t)); !errors.Is(err, boom) {
		t.Fatalf("Start = %v", err)
	}
	if w.Running() {
		t.Error("running after a failed start")
	}
	if got := context.Cause(w.Life()); !errors.Is(got, boom) {
		t.Errorf("life's cause = %v, want the start's error", got)
	}
	if err := w.Stop(ctx(t)); err != nil {
		t.Errorf("Stop after a failed start = %v", err)
	}
}

func TestStartWithEndedContext(t *testing.T) {
	t.Parallel()
	c, cancel := context.WithCancel(context.Background())
	cancel()
	w := &watcher{}
	if err := w.Start(c); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with an ended ctx = %v", err)
	}
}

// TestConcurrentStops: every Stop returns the first one's error, after
// the goroutines ended.
func TestConcurrentStops(t *testing.T) {
	t.Parallel()
	var b startstop.Base
	drainErr := errors.New("drain cut short")
	var ended atomic.Int32
	if err := b.Start(ctx(t), func(context.Context) error {
		for range 4 {
			b.Go(func(life context.Context) {
				<-life.Done()
				time.Sleep(10 * time.Millisecond)
				ended.Add(1)
			})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			errs[i] = b.Stop(ctx(t), nil, func(context.Context) error { return drainErr })
		})
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, drainErr) {
			t.Errorf("Stop %d = %v, want the drain's error", i, err)
		}
	}
	if n := ended.Load(); n != 4 {
		t.Errorf("%d of 4 goroutines ended before Stop returned", n)
	}
	if got := context.Cause(b.Life()); !errors.Is(got, startstop.ErrStopped) {
		t.Errorf("cause without a name = %v, want ErrStopped", got)
	}
}

// TestDrainUntilCtxEnds: the drain may use Stop's ctx to the end; the
// goroutines see the life cancelled only after it.
func TestDrainUntilCtxEnds(t *testing.T) {
	t.Parallel()
	var b startstop.Base
	cancelledDuringDrain := make(chan bool, 1)
	if err := b.Start(ctx(t), func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := b.Stop(stopCtx, errWatcherStopped, func(ctx context.Context) error {
		<-ctx.Done()
		cancelledDuringDrain <- b.Life().Err() != nil
		return ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop = %v", err)
	}
	if <-cancelledDuringDrain {
		t.Error("the life was cancelled before the drain ended")
	}
	if got := context.Cause(b.Life()); got != errWatcherStopped {
		t.Errorf("cause = %v", got)
	}
}
