package health

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// RefreshDefault is how often a Background check runs when probed: the
// JetStream API requests of readiness are a few per RefreshDefault per
// process however often a load balancer probes.
const RefreshDefault = 5 * time.Second

// StaleFactor bounds how old a Background check's last answer may be: once
// JetStream has not answered it for StaleFactor refresh intervals (15 s by
// default), the check fails.
const StaleFactor = 3

// errNoAnswer is what a check returns when JetStream did not answer in
// time: no result, so a Background check keeps its last one.
var errNoAnswer = errors.New("JetStream did not answer in time")

// Background returns c run at most every interval (RefreshDefault when
// zero), out of the probes' way: a probe answers at once from the last
// result and, when it is older than interval, starts one refresh (never
// more than one at a time) bounded by interval. A refresh that gets no
// answer in time (a timeout) keeps the last result; any other outcome
// replaces it. The check fails once its last answer is older than
// StaleFactor intervals. A probe with no usable result (the first one, or
// after a long pause without probes) waits for the refresh within its own
// deadline. No goroutine outlives a refresh: without probes nothing runs.
//
// The probe's report gives the age of the result it used (Report.Age).
func Background(c Check, interval time.Duration) Check {
	if interval <= 0 {
		interval = RefreshDefault
	}
	b := &cached{inner: c.Func, key: c.key, every: interval, stale: StaleFactor * interval}
	c.Func = b.check
	return c
}

// cached holds the last result of a Background check.
type cached struct {
	inner func(context.Context) error
	key   func() string // nil, or what the result depends on (Check.key)
	every time.Duration
	stale time.Duration

	mu   sync.Mutex
	at   time.Time     // when the last answer came; zero before the first
	err  error         // the last answer
	of   string        // the key the last answer is for
	done chan struct{} // the refresh in flight, nil when none
}

func (b *cached) check(ctx context.Context) error {
	key := ""
	if b.key != nil {
		key = b.key()
	}
	for waited := false; ; waited = true {
		b.mu.Lock()
		has := !b.at.IsZero() && b.of == key // an answer about what is checked now
		age := time.Since(b.at)
		if !waited && b.done == nil && (!has || age >= b.every) {
			b.done = make(chan struct{})
			go b.refresh(b.done, key)
		}
		done := b.done
		err := b.err
		b.mu.Unlock()
		switch {
		case has && age < b.stale:
			recordAge(ctx, age)
			return err
		case waited || done == nil:
			if !has {
				return errors.New("JetStream has not answered yet")
			}
			recordAge(ctx, age)
			return fmt.Errorf("JetStream has not answered for %s (stale after %s)", age.Round(100*time.Millisecond), b.stale)
		}
		select { // no usable answer: wait for the refresh within the probe's time
		case <-done:
		case <-ctx.Done():
		}
	}
}

// refresh runs the check once and records its answer, then closes done.
func (b *cached) refresh(done chan struct{}, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.every)
	err := b.run(ctx)
	noAnswer := ctx.Err() != nil || errors.Is(err, errNoAnswer) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
	cancel()
	b.mu.Lock()
	if !noAnswer {
		b.at, b.err, b.of = time.Now(), err, key
	}
	b.done = nil
	b.mu.Unlock()
	close(done)
}

// run runs the check; a panic fails it instead of the process (a probe's
// own goroutine would have been saved by net/http).
func (b *cached) run(ctx context.Context) (err error) {
	defer func() {
		if recover() != nil { // its value stays out of the probe's answer
			err = errors.New("the check panicked")
		}
	}()
	return b.inner(ctx)
}

// ageKey is the context key of the slot where a Background check records
// the age of the result a probe used.
type ageKey struct{}

func recordAge(ctx context.Context, age time.Duration) {
	if p, ok := ctx.Value(ageKey{}).(*time.Duration); ok {
		*p = age
	}
}
