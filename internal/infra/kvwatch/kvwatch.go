// Package kvwatch holds the two pieces every store that follows a
// JetStream key-value bucket needs: the loop that applies the bucket's
// changes (Follow), and the wake-ups of callers waiting for one key's
// next change (Wakes). The durable tasks, the approvals and the budgets
// use them.
package kvwatch

import (
	"context"
	"sync"

	js "github.com/nats-io/nats.go/jetstream"
)

// Follow hands each change w reports to seen, in order, until life ends
// or w's updates close; then it stops w. The nil entry that marks the end
// of the initial values is not handed on.
func Follow(life context.Context, w js.KeyWatcher, seen func(js.KeyValueEntry)) {
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-life.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				seen(e)
			}
		}
	}
}

// Wakes are the callers waiting for a key's next change. Its zero value
// is ready to use.
type Wakes struct {
	mu sync.Mutex
	m  map[string]*waiting
}

// waiting is the callers of one key: ch is closed at the key's next
// change.
type waiting struct {
	ch chan struct{}
	n  int // the callers holding it
}

// Hold registers a caller waiting for key's next change: the channel is
// closed at it (Wake). Take it before reading the key, so that a change
// after the read is not missed; release it when done waiting.
func (w *Wakes) Hold(key string) (changed <-chan struct{}, release func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*waiting{}
	}
	x, ok := w.m[key]
	if !ok {
		x = &waiting{ch: make(chan struct{})}
		w.m[key] = x
	}
	x.n++
	return x.ch, func() { w.release(key, x) }
}

// release lets go of x: the last caller to leave removes it, so that
// waits on keys that never change leave nothing behind.
func (w *Wakes) release(key string, x *waiting) {
	w.mu.Lock()
	defer w.mu.Unlock()
	x.n--
	if x.n == 0 && w.m[key] == x {
		delete(w.m, key)
	}
}

// Wake wakes the callers waiting for key, if any.
func (w *Wakes) Wake(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if x, ok := w.m[key]; ok {
		close(x.ch)
		delete(w.m, key)
	}
}

// Len is how many keys have callers waiting.
func (w *Wakes) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}
