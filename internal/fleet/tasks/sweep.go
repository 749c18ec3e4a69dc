package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
	"github.com/toolpool/toolpool/internal/infra/kvwatch"
)

// watch follows every lease of the bucket: it keeps the index the sweeper
// reads, tells this replica's runners of cancellations, and wakes the
// Waits of a task whose lease changed or went (the task ended).
func (s *Store) watch(life context.Context, w js.KeyWatcher) {
	kvwatch.Follow(life, w, s.seen)
}

// seen takes one lease update.
func (s *Store) seen(e js.KeyValueEntry) {
	id, ok := strings.CutSuffix(e.Key(), ".lease")
	if !ok {
		return
	}
	var cancel *runner
	s.mu.Lock()
	if e.Operation() != js.KeyValuePut {
		delete(s.leases, id)
	} else {
		var l lease
		if err := json.Unmarshal(e.Value(), &l); err == nil {
			s.leases[id] = leaseSeen{lease: l, rev: e.Revision(), written: e.Created()}
			if r := s.running[id]; r != nil && l.Cancel && l.Owner == s.cfg.Instance {
				cancel = r
			}
		}
	}
	s.wake(id)
	s.mu.Unlock()
	if cancel != nil {
		cancel.cancelCalls()
	}
}

// sweep adopts, every Lease/3, the tasks whose lease lapsed or was
// handed over, whether or not anyone polls them.
func (s *Store) sweep(life context.Context) {
	tick := time.NewTicker(s.cfg.Lease / 3)
	defer tick.Stop()
	for {
		select {
		case <-life.Done():
			return
		case <-tick.C:
			for _, o := range s.orphans() {
				s.adopt(life, o.id, o.seen)
			}
		}
	}
}

// orphan is a task the sweeper found without a live owner.
type orphan struct {
	id   string
	seen leaseSeen
}

// orphans lists the tasks whose lease lapsed or was handed over, that
// this replica does not run.
func (s *Store) orphans() []orphan {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil
	}
	now := time.Now()
	var out []orphan
	for id, l := range s.leases {
		if _, mine := s.running[id]; mine {
			continue
		}
		if l.Owner == "" || now.Sub(l.written) > s.cfg.Lease {
			out = append(out, orphan{id, l})
		}
	}
	return out
}

// adopt takes the task id over: a compare-and-set of its lease on the
// revision the watch saw (of the replicas that try, exactly one wins),
// then its calls are dispatched again here. A task that ended, or whose
// record is gone, only has its lease removed.
func (s *Store) adopt(life context.Context, id string, seen leaseSeen) {
	ctx, cancel := context.WithTimeout(life, writeTimeout)
	defer cancel()
	l := seen.lease
	prev := l.Owner
	l.Owner, l.Adoptions = s.cfg.Instance, l.Adoptions+1
	data, _ := json.Marshal(l)
	rev, err := s.kv.Update(ctx, leaseKey(id), data, seen.rev)
	if err != nil {
		if !errors.Is(err, js.ErrKeyRevisionMismatch) {
			s.log.Debug("adopting a task failed", slog.String("task", id), slog.Any("error", err))
		}
		return // refreshed, or adopted by another replica
	}
	e, err := s.kv.Get(ctx, id)
	var t Task
	if err == nil {
		err = json.Unmarshal(e.Value(), &t)
	}
	if err != nil || t.State.Final() || t.ID != id {
		s.purge(leaseKey(id)) // ended, expired, or never recorded
		return
	}
	r := &runner{s: s, task: t, rev: e.Revision(), lease: l, leaseRev: rev}
	if l.Cancel { // cancelled while its owner was gone: nothing left to run here
		r.finish(outcome{err: context.Canceled})
		return
	}
	if !s.enter(r) {
		r.handOver()
		return
	}
	s.log.Info("adopted a task", slog.String("task", id), slog.String("previous_owner", prev), slog.Int("adoptions", l.Adoptions))
	s.base.Go(r.run)
}
