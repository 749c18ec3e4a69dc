package approval

import (
	"context"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/kvwatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
)

// Wait waits for the decision on the approval id: until one is made (on
// any replica, or by a command), its deadline passes (TimedOut, written
// by the first to see it) or ctx ends (Pending, with ctx's error). It
// needs a started Store.
func (s *Store) Wait(ctx context.Context, id string) (policy.Decision, error) {
	s.mu.Lock()
	watching := s.watching
	s.mu.Unlock()
	if !watching {
		return policy.Decision{ID: id}, ErrNotWatching
	}
	for {
		changed, release := s.wakes.Hold(id) // before the read: a change after it wakes us
		d, done, err := s.waitOnce(ctx, id, changed)
		release()
		if done || err != nil {
			return d, err
		}
	}
}

// waitOnce reads the record id and, while it is pending, waits for its
// next change (done false) or its deadline (the next read writes the
// timeout), or the end of ctx or of the Store.
func (s *Store) waitOnce(ctx context.Context, id string, changed <-chan struct{}) (d policy.Decision, done bool, err error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return policy.Decision{ID: id}, true, err
	}
	if r.State != StatePending {
		return r.Decision(s.cfg.Now()), true, nil
	}
	timer := time.NewTimer(max(r.Deadline().Sub(s.cfg.Now()), 0))
	defer timer.Stop()
	select {
	case <-changed:
		return d, false, nil
	case <-timer.C:
		return d, false, nil
	case <-ctx.Done():
		return r.Decision(s.cfg.Now()), true, context.Cause(ctx)
	case <-s.base.Stopping():
		return r.Decision(s.cfg.Now()), true, ErrStopped
	}
}

// watch follows the bucket: the pending records and their deadlines, the
// Waits to wake.
func (s *Store) watch(life context.Context, w js.KeyWatcher) {
	kvwatch.Follow(life, w, s.seen)
}

// seen takes one change of the bucket.
func (s *Store) seen(e js.KeyValueEntry) {
	id := e.Key()
	var (
		r   Record
		err error
	)
	if e.Operation() == js.KeyValuePut {
		r, err = decode(e)
	}
	s.mu.Lock()
	if e.Operation() == js.KeyValuePut && err == nil && r.State == StatePending {
		s.pending[id] = r.Deadline()
	} else {
		delete(s.pending, id)
	}
	n := len(s.pending)
	s.mu.Unlock()
	s.wakes.Wake(id)
	s.cfg.Metrics.Pending(n)
}

// sweep writes timed_out, every sweepEvery, for the pending records whose
// deadline passed, whether or not a Wait is on them.
func (s *Store) sweep(life context.Context) {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-life.Done():
			return
		case <-tick.C:
		}
		now := s.cfg.Now()
		var due []string
		s.mu.Lock()
		for id, deadline := range s.pending {
			if !now.Before(deadline) {
				due = append(due, id)
			}
		}
		s.mu.Unlock()
		for _, id := range due {
			ctx, cancel := context.WithTimeout(life, 5*time.Second)
			if _, err := s.Get(ctx, id); err != nil && life.Err() == nil {
				s.log.Warn("approval: time out a pending approval", "approval", id, "err", err)
			}
			cancel()
		}
	}
}
