package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// runner runs one task this replica owns: its Dispatch, the lease's
// refresh, the outcome's write.
type runner struct {
	s        *Store
	task     Task
	rev      uint64 // the record's revision
	lease    lease
	leaseRev uint64
	cancel   context.CancelCauseFunc // the Dispatch's ctx
	admitted chan error              // Start's answer: nil once admitted; nil for an adoption
	once     sync.Once
	in       atomic.Bool // the dispatcher admitted the turn
}

// outcome is what a Dispatch returned.
type outcome struct {
	results []envelope.Result
	err     error
}

// Start records a task for req and runs its calls in the background on
// this replica. It returns once the dispatcher admitted the turn: a turn
// refused for saturation is not recorded, and the *dispatch.SaturatedError
// is returned. A request that does not fit a record is ErrTooLarge; one
// without calls ErrInvalid.
func (s *Store) Start(ctx context.Context, req Request) (Task, error) {
	if len(req.Calls) == 0 {
		return Task{}, fmt.Errorf("%w: no calls", ErrInvalid)
	}
	if req.Timeout < 0 || req.TTL < 0 {
		return Task{}, fmt.Errorf("%w: a negative timeout or TTL", ErrInvalid)
	}
	now := time.Now().UTC()
	t := Task{
		ID: newID(), State: StateWorking, Created: now, Updated: now,
		TTL: s.cfg.Retention, PollInterval: s.cfg.PollInterval, Request: req, Owner: s.cfg.Instance,
	}
	if req.TTL > 0 && req.TTL < s.cfg.Retention && s.msgTTL {
		t.TTL = max(req.TTL, time.Second)
	}
	if t.Request.Timeout == 0 {
		t.Request.Timeout = s.cfg.Timeout
	}
	data, err := json.Marshal(t)
	if err != nil {
		return Task{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(data) > s.maxRec {
		return Task{}, fmt.Errorf("%w: the task is %d bytes, over the limit of %d", ErrTooLarge, len(data), s.maxRec)
	}
	r := &runner{s: s, task: t, lease: lease{Owner: s.cfg.Instance}, admitted: make(chan error, 1)}
	if !s.enter(r) {
		return Task{}, ErrStopped
	}
	// The lease first: a record without one would never be adopted, a
	// lease without a record is removed by the sweeper.
	ld, _ := json.Marshal(r.lease)
	if r.leaseRev, err = s.kv.Create(ctx, leaseKey(t.ID), ld); err == nil {
		r.rev, err = s.kv.Create(ctx, t.ID, data)
	}
	if err != nil {
		s.leave(r)
		s.purge(leaseKey(t.ID))
		return Task{}, fmt.Errorf("tasks: record the task: %w", err)
	}
	s.base.Go(r.run)
	select {
	case err = <-r.admitted:
	case <-ctx.Done():
		err = ctx.Err() // the task runs on; its creator went away
	}
	if err != nil {
		return Task{}, err
	}
	return t, nil
}

// enter registers r as running here, unless the store is stopping.
func (s *Store) enter(r *runner) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || !s.base.Running() {
		return false
	}
	if _, dup := s.running[r.task.ID]; dup {
		return false
	}
	s.running[r.task.ID] = r
	return true
}

// leave unregisters r.
func (s *Store) leave(r *runner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[r.task.ID] == r {
		delete(s.running, r.task.ID)
	}
}

// purge removes a key, best effort, leaving a marker that expires.
func (s *Store) purge(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	var err error
	if s.msgTTL {
		err = s.kv.Purge(ctx, key, js.PurgeTTL(markerTTL))
	} else {
		err = s.kv.Delete(ctx, key)
	}
	if err != nil {
		s.log.Debug("removing a task key failed", slog.String("key", key), slog.Any("error", err))
	}
}

// writeTimeout bounds each write of a runner.
const writeTimeout = 10 * time.Second

// answer tells Start the admission's verdict, once.
func (r *runner) answer(err error) {
	r.once.Do(func() {
		if r.admitted != nil {
			r.admitted <- err
		}
	})
}

// dispatchCtx is the ctx of the task's Dispatch: not the life's (a
// replica that leaves hands its tasks over without cancelling their
// calls), bounded by the request's timeout, with the request's tenant,
// weight, priority and trace context. end releases it; expire ends the
// turn as its deadline would (see expiringCtx).
func (r *runner) dispatchCtx(life context.Context) (ctx context.Context, end, expire func()) {
	req := r.task.Request
	base, cancelCause := context.WithCancelCause(context.WithoutCancel(life))
	base, cancel := context.WithTimeout(base, req.Timeout)
	r.s.mu.Lock()
	r.cancel = cancelCause
	r.s.mu.Unlock()
	exp := newExpiringCtx(base)
	ctx = dispatch.WithTenant(exp, req.Tenant)
	ctx = dispatch.WithWeight(ctx, req.Weight)
	ctx = dispatch.WithPriority(ctx, req.Priority)
	if req.KeyName != "" {
		ctx = policy.WithKeyName(ctx, req.KeyName)
	}
	if req.NoCache {
		ctx = policy.WithNoCache(ctx)
	}
	tp := req.Traceparent
	if !dispatch.ValidTraceparent(tp) {
		tp = dispatch.NewTraceparent()
	}
	ctx = dispatch.WithTraceparent(ctx, tp)
	ctx = dispatch.WithAdmitted(ctx, func() { r.in.Store(true); r.answer(nil) })
	return ctx, func() { cancel(); cancelCause(nil) }, exp.expire
}

// run is the runner's life: dispatch the calls, refresh the lease while
// they run, write the outcome. When the store's life ends first (Stop),
// the lease is released for another replica to adopt and the Dispatch
// ends as at its deadline, its calls left running for the adopter.
func (r *runner) run(life context.Context) {
	s := r.s
	defer s.leave(r)
	ctx, cancel, expire := r.dispatchCtx(life)
	defer cancel()
	done := make(chan outcome, 1)
	dispatchOnce := func() {
		go func() {
			res, err := s.cfg.Dispatcher.Dispatch(ctx, r.task.Request.Session, r.task.Request.Calls)
			done <- outcome{res, err}
		}()
	}
	dispatchOnce()
	tick := time.NewTicker(s.cfg.Lease / 3)
	defer tick.Stop()
	var retry <-chan time.Time
	for {
		select {
		case o := <-done:
			if o.err != nil && r.admitted != nil && !r.in.Load() {
				// A new task the dispatcher did not take (saturated, not
				// running): refused as a sync call would be, nothing kept.
				r.answer(o.err)
				s.purge(r.task.ID)
				s.purge(leaseKey(r.task.ID))
				return
			}
			if sat, ok := errors.AsType[*dispatch.SaturatedError](o.err); ok {
				retry = time.After(max(sat.RetryAfter, time.Second)) // an adopted task waits its turn
				continue
			}
			r.answer(nil)
			if errors.Is(o.err, dispatch.ErrStopped) {
				r.handOver() // the dispatcher stopped under us: another replica finishes
				return
			}
			r.finish(o)
			return
		case <-retry:
			retry = nil
			dispatchOnce()
		case <-tick.C:
			if !r.refresh() {
				expire()
				return // another replica adopted it: its Dispatch is the one that counts
			}
		case <-life.Done():
			r.handOver()
			expire()
			return
		}
	}
}

// refresh renews the lease; false when the task is no longer this
// replica's. A cancellation written on the lease cancels the calls.
func (r *runner) refresh() bool {
	s := r.s
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	data, _ := json.Marshal(r.lease)
	rev, err := s.kv.Update(ctx, leaseKey(r.task.ID), data, r.leaseRev)
	if err == nil {
		r.leaseRev = rev
		return true
	}
	if !errors.Is(err, js.ErrKeyRevisionMismatch) {
		s.log.Warn("refreshing a task's lease failed", slog.String("task", r.task.ID), slog.Any("error", err))
		return true // a passing outage: try again at the next tick
	}
	e, err := s.kv.Get(ctx, leaseKey(r.task.ID))
	if err != nil {
		return true
	}
	var l lease
	if json.Unmarshal(e.Value(), &l) != nil || l.Owner != s.cfg.Instance || l.Adoptions != r.lease.Adoptions {
		s.log.Info("a task was adopted by another replica", slog.String("task", r.task.ID), slog.String("owner", l.Owner))
		return false
	}
	r.leaseRev = e.Revision()
	if l.Cancel && !r.lease.Cancel {
		r.lease.Cancel = true
		r.cancelCalls()
	}
	return true
}

// handOver releases the lease (owner "") so that another replica adopts
// the task at once.
func (r *runner) handOver() {
	s := r.s
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	l := r.lease
	l.Owner = ""
	data, _ := json.Marshal(l)
	if _, err := s.kv.Update(ctx, leaseKey(r.task.ID), data, r.leaseRev); err != nil {
		s.log.Warn("handing a task over failed: another replica adopts it once its lease lapses",
			slog.String("task", r.task.ID), slog.Any("error", err))
	}
}

// finish writes the task's outcome, unless it ended otherwise meanwhile
// (cancelled, or finished by a replica that adopted it), then removes
// the lease.
func (r *runner) finish(o outcome) {
	s := r.s
	t := r.task
	t.Updated, t.Owner, t.Adoptions = time.Now().UTC(), s.cfg.Instance, r.lease.Adoptions
	var over *policy.ExhaustedError
	switch {
	case o.err == nil:
		t.State, t.Results = StateCompleted, o.results
	case errors.As(o.err, &over) && len(over.Results) == len(t.Request.Calls):
		// An adopted turn every call of which a spent budget refused: its
		// answer is those refusals, as a new one's 429 would carry them.
		t.State, t.Results = StateCompleted, over.Results
	case errors.Is(o.err, context.Canceled):
		t.State, t.Error = StateCancelled, "cancelled by the client"
	case errors.Is(o.err, context.DeadlineExceeded):
		t.State, t.Error = StateFailed, "the calls did not get their turn before the timeout; post them again"
	case errors.Is(o.err, dispatch.ErrUnavailable):
		t.State, t.Error = StateFailed, "the tool pool did not take the calls: its message server is unreachable or did not store them in time; post them again"
	default:
		s.log.Warn("a task's calls could not be handled", slog.String("task", t.ID), slog.Any("error", o.err))
		t.State, t.Error = StateFailed, "the tool calls could not be handled"
	}
	if r.writeEnd(&t) {
		s.purge(leaseKey(t.ID))
	}
}

// writeEnd writes the ended task t over the record, unless the record
// ended otherwise meanwhile (then the first end stands). A write that
// fails is tried again a few times; false when it never went through: the
// lease is left to lapse, and the replica that adopts the task answers it
// from the stored results.
func (r *runner) writeEnd(t *Task) bool {
	s := r.s
	data := r.encode(t)
	rev := r.rev
	for attempt := range 6 {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		_, err := s.write(ctx, t.ID, data, rev, t.TTL)
		if err == nil {
			cancel()
			return true
		}
		if errors.Is(err, js.ErrKeyRevisionMismatch) {
			// Cancelled, or answered by a replica that adopted it, or our
			// own earlier write whose acknowledgement was lost.
			cur, curRev, gerr := s.get(ctx, t.Request.Tenant, t.ID)
			cancel()
			if gerr == nil && cur.State.Final() {
				return true // the first end stands
			}
			if gerr == nil {
				rev = curRev
				continue
			}
			err = gerr
		}
		cancel()
		s.log.Warn("writing a task's outcome failed", slog.String("task", t.ID), slog.Int("attempt", attempt+1), slog.Any("error", err))
		time.Sleep(time.Duration(1<<attempt) * 100 * time.Millisecond)
	}
	return false
}

// encode is t as JSON; an outcome over the record limit is written as a
// failure that says what to do.
func (r *runner) encode(t *Task) []byte {
	data, err := json.Marshal(t)
	if err == nil && len(data) <= r.s.maxRec {
		return data
	}
	size := len(data)
	t.State, t.Results = StateFailed, nil
	t.Error = fmt.Sprintf("the results are %d bytes, over the %d bytes a task can keep; "+
		"send the same calls again synchronously: the pool keeps their results for %s and answers them without running the tools again",
		size, r.s.maxRec, classify.FormatDuration(resultsKeptFor))
	data, _ = json.Marshal(t)
	return data
}

// resultsKeptFor is how long TOOL_RESULTS keeps a result by default
// (jetstream.ResultsMaxAgeDefault).
const resultsKeptFor = time.Hour

// cancelCalls cancels the task's Dispatch: its calls are cancelled
// pool-wide.
func (r *runner) cancelCalls() {
	r.s.mu.Lock()
	c := r.cancel
	r.s.mu.Unlock()
	if c != nil {
		c(errCancelled)
	}
}
