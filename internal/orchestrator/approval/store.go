package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/kvwatch"
	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Errors of the Store's methods.
var (
	// ErrNotFound: no approval has that id (or it is no longer kept).
	ErrNotFound = errors.New("no such approval")
	// ErrNoBucket: Open found no approvals bucket (no orchestrator has
	// created it yet: there are no approvals).
	ErrNoBucket = errors.New("approval: no approvals bucket yet")
	// ErrStopped is Start after Stop, and Wait's error when the Store
	// stops.
	ErrStopped = errors.New("approval: store stopped")
	// ErrNotWatching is Wait's error on a Store that was opened with Open
	// rather than started.
	ErrNotWatching = errors.New("approval: Wait needs a started store (Start), not one opened with Open")
)

// bound is the bucket a Store is bound to, and the largest record it
// takes.
type bound struct {
	js.KeyValue
	maxRec int
}

// ErrNotStarted is the error of a Store's methods before Start (or Open)
// bound its bucket.
var ErrNotStarted = errors.New("approval: store not started")

// bucket is the bucket s is bound to.
func (s *Store) bucket() (*bound, error) {
	if b := s.kv.Load(); b != nil {
		return b, nil
	}
	return nil, ErrNotStarted
}

// recordHeadroom is what a record may not use of the server's maximum
// message size: room for the subject and headers.
const recordHeadroom = 4 << 10

// Store is one process's view of the approvals bucket. It is safe for
// concurrent use.
type Store struct {
	base startstop.Base
	cfg  Config
	log  *slog.Logger
	kv   atomic.Pointer[bound] // set by Start or Open

	mu       sync.Mutex
	watching bool
	pending  map[string]time.Time // pending ids and their deadlines, from the watch
	wakes    kvwatch.Wakes        // the Waits, woken at their record's change
}

// The Store is the policy gate's approvals.
var _ policy.Approvals = (*Store)(nil)

// New returns a Store; Start binds its bucket and watches it.
func New(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, log: cfg.Logger, pending: map[string]time.Time{}}, nil
}

// Open returns a Store bound to the bucket that exists (ErrNoBucket when
// there is none), without a watch: Hold, Get, List and Decide work on it,
// Wait does not. It is what commands use; nothing needs stopping.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	kv, err := s.cfg.JS.KeyValue(ctx, s.cfg.Bucket)
	if errors.Is(err, js.ErrBucketNotFound) {
		return nil, ErrNoBucket
	}
	if err != nil {
		return nil, fmt.Errorf("approval: open bucket %s: %w", s.cfg.Bucket, err)
	}
	s.setKV(kv)
	return s, nil
}

// Start creates the bucket (or binds it when it exists), watches it, and
// writes timed_out for the pending records whose deadline passes. Stop
// ends it.
func (s *Store) Start(ctx context.Context) error {
	return s.base.Start(ctx, func(life context.Context) error {
		if err := s.bind(ctx); err != nil {
			return err
		}
		w, err := s.kv.Load().WatchAll(life)
		if err != nil {
			return fmt.Errorf("approval: watch bucket %s: %w", s.cfg.Bucket, err)
		}
		s.mu.Lock()
		s.watching = true
		s.mu.Unlock()
		s.base.Go(func(life context.Context) { s.watch(life, w) })
		s.base.Go(s.sweep)
		return nil
	})
}

// Stop ends the watch: the Waits in progress return ErrStopped, with the
// calls still pending (their records stay: the same call sent again, to
// any replica, waits on).
func (s *Store) Stop(ctx context.Context) error {
	return s.base.Stop(ctx, ErrStopped, nil)
}

// bind binds the bucket, creating it when it does not exist.
func (s *Store) bind(ctx context.Context) error {
	kv, err := s.cfg.JS.KeyValue(ctx, s.cfg.Bucket)
	if errors.Is(err, js.ErrBucketNotFound) {
		kv, err = s.cfg.JS.CreateKeyValue(ctx, js.KeyValueConfig{
			Bucket:      s.cfg.Bucket,
			Description: "toolpool: tool calls held for a person's approval, one record per approval id (pending, then approved, denied or timed_out)",
			History:     3, // the request, its decision and its use, with the server's times
			TTL:         bucketTTL(s.cfg.Retention),
			Storage:     s.cfg.Storage,
			Replicas:    s.cfg.Replicas,
		})
		if errors.Is(err, js.ErrBucketExists) {
			kv, err = s.cfg.JS.KeyValue(ctx, s.cfg.Bucket) // created meanwhile by another replica
		}
	}
	if err != nil {
		return fmt.Errorf("approval: open bucket %s: %w", s.cfg.Bucket, err)
	}
	s.setKV(kv)
	return nil
}

func (s *Store) setKV(kv js.KeyValue) {
	s.kv.Store(&bound{KeyValue: kv, maxRec: int(s.cfg.JS.Conn().MaxPayload()) - recordHeadroom})
}

// Required reports whether c needs approval: its tool has a rule that
// holds for its input. An input that is not a JSON object needs none: the
// dispatcher refuses it without running it.
func (s *Store) Required(c *policy.Call) bool {
	r := c.Info.Approval
	if r == nil {
		return false
	}
	if in := bytes.TrimLeft(c.Input, " \t\r\n"); len(in) == 0 || in[0] != '{' || !json.Valid(in) {
		return false
	}
	return r.Requires(c.Input)
}

// Hold records c as waiting for approval, or finds the record of the same
// call held before (by any replica), and returns its decision so far. An
// approval spent by a run of the call (Use) whose result is no longer
// kept is held again: pending, with a new request time and deadline.
func (s *Store) Hold(ctx context.Context, c *policy.Call) (policy.Decision, error) {
	kv, err := s.bucket()
	if err != nil {
		return policy.Decision{}, err
	}
	now := s.cfg.Now()
	timeout := holdTimeout(c)
	id := ID(c.Tenant, c.Session, c.ID, c.Tool, c.Input)
	rec := Record{
		ID: id, Tool: c.Tool, Input: c.Input, Tenant: c.Tenant, Session: c.Session, CallID: c.ID, KeyName: c.Key,
		Binding: Binding(c.Tenant, c.Tool, c.Input), CreatedAt: now.UTC(), Timeout: timeout, State: StatePending,
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return policy.Decision{ID: id}, fmt.Errorf("approval: the input of call %s to %s is not JSON: %w", c.ID, c.Tool, err)
	}
	if len(data) > kv.maxRec {
		return policy.Decision{ID: id}, fmt.Errorf("approval: the call %s to %s is too large to hold for approval: its record is %d bytes, the bucket takes %d", c.ID, c.Tool, len(data), kv.maxRec)
	}
	if _, err := kv.Create(ctx, id, data); err == nil {
		s.cfg.Metrics.Held()
		s.log.Info("call held for approval", "approval", id, "tool", c.Tool, "tenant", c.Tenant, "session", c.Session,
			"call", c.ID, "key", c.Key, "timeout", timeout)
		return rec.Decision(now), nil
	} else if !errors.Is(err, js.ErrKeyExists) {
		return policy.Decision{ID: id}, fmt.Errorf("approval: hold call %s to %s: %w", c.ID, c.Tool, err)
	}
	got, err := s.Get(ctx, id) // held before
	if err != nil {
		return policy.Decision{ID: id}, err
	}
	if got.Tool != c.Tool || got.Tenant != c.Tenant || got.Session != c.Session || got.CallID != c.ID {
		return policy.Decision{ID: id}, fmt.Errorf("approval: %s holds another call (tool %s, call %s), not call %s to %s", id, got.Tool, got.CallID, c.ID, c.Tool)
	}
	if got, err = s.spendIfDue(ctx, got, c); err != nil {
		return policy.Decision{ID: id}, err
	}
	return got.Decision(s.cfg.Now()), nil
}

// holdTimeout is how long c waits for a decision: its tool's rule's.
func holdTimeout(c *policy.Call) time.Duration {
	if c.Info.Approval == nil {
		return tools.ApprovalTimeoutDefault
	}
	return min(c.Info.Approval.TimeoutOrDefault(), tools.ApprovalTimeoutMax) // never outlives the bucket
}

// Get returns the approval id, with its effective state: a pending record
// past its deadline is written timed_out (compare-and-set; the first to
// see it does).
func (s *Store) Get(ctx context.Context, id string) (Record, error) {
	r, err := s.read(ctx, id)
	if err != nil {
		return r, err
	}
	return s.settle(ctx, r), nil
}

// read returns the record id as stored.
func (s *Store) read(ctx context.Context, id string) (Record, error) {
	if !ValidID(id) {
		return Record{}, fmt.Errorf("approval %q: %w (an approval id is ap- and 20 hex characters)", id, ErrNotFound)
	}
	kv, err := s.bucket()
	if err != nil {
		return Record{}, err
	}
	e, err := kv.Get(ctx, id)
	if errors.Is(err, js.ErrKeyNotFound) || errors.Is(err, js.ErrKeyDeleted) {
		return Record{}, fmt.Errorf("approval %s: %w (decided ones are kept %s)", id, ErrNotFound, s.retention(ctx))
	}
	if err != nil {
		return Record{}, fmt.Errorf("approval %s: read: %w", id, err)
	}
	return decode(e)
}

// retention is the bucket's TTL less the longest timeout: how long a
// decided record is kept at least.
func (s *Store) retention(ctx context.Context) string {
	if st, err := s.kv.Load().Status(ctx); err == nil && st.TTL() > tools.ApprovalTimeoutMax {
		return (st.TTL() - tools.ApprovalTimeoutMax).String()
	}
	return s.cfg.Retention.String()
}

// decode reads a record from its entry.
func decode(e js.KeyValueEntry) (Record, error) {
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Record{}, fmt.Errorf("approval %s: a record that cannot be read: %w", e.Key(), err)
	}
	if r.ID != e.Key() {
		return Record{}, fmt.Errorf("approval %s: the record names another id, %q", e.Key(), r.ID)
	}
	r.Revision, r.Written = e.Revision(), e.Created()
	return r, nil
}

// settle returns r, written timed_out first when it is pending past its
// deadline. When another writer came first, it returns what they wrote;
// when the write fails, r's effective state (the next reader writes it).
func (s *Store) settle(ctx context.Context, r Record) Record {
	now := s.cfg.Now()
	t := r.effective(now)
	if t.State == r.State {
		return r
	}
	data, err := json.Marshal(t)
	if err != nil {
		return t
	}
	rev, err := s.kv.Load().Update(ctx, r.ID, data, r.Revision) // r was read: the bucket is bound
	switch {
	case err == nil:
		t.Revision = rev
		s.cfg.Metrics.Decided(string(StateTimedOut))
		s.log.Info("approval timed out", "approval", r.ID, "tool", r.Tool, "tenant", r.Tenant, "session", r.Session,
			"timeout", r.Timeout, "deadline", r.Deadline())
		return t
	case conflict(err):
		if again, err := s.read(ctx, r.ID); err == nil {
			return again.effective(now)
		}
	}
	return t
}

// List returns the pending approvals, the soonest deadline first; with
// all, then the decided ones kept, the newest decision first. States are
// effective (a pending record past its deadline is listed timed out).
func (s *Store) List(ctx context.Context, all bool) ([]Record, error) {
	kv, err := s.bucket()
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx, js.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("approval: list %s: %w", s.cfg.Bucket, err)
	}
	defer func() { _ = w.Stop() }()
	now := s.cfg.Now()
	var out []Record
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("approval: list %s: %w", s.cfg.Bucket, context.Cause(ctx))
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("approval: list %s: the watch ended", s.cfg.Bucket)
			}
			if e == nil { // the values there are, all in
				sortRecords(out)
				return out, nil
			}
			r, err := decode(e)
			if err != nil {
				s.log.Warn("approval: a record that cannot be read", "key", e.Key(), "err", err)
				continue
			}
			if r = r.effective(now); all || r.State == StatePending {
				out = append(out, r)
			}
		}
	}
}

// sortRecords puts pending records first, the soonest deadline first,
// then decided ones, the newest decision first.
func sortRecords(rs []Record) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if (a.State == StatePending) != (b.State == StatePending) {
			return a.State == StatePending
		}
		if a.State == StatePending {
			return a.Deadline().Before(b.Deadline())
		}
		return a.DecidedAt.After(b.DecidedAt)
	})
}

// conflict reports whether err is a compare-and-set that lost: the record
// changed since it was read.
func conflict(err error) bool {
	return errors.Is(err, js.ErrKeyRevisionMismatch) || errors.Is(err, js.ErrKeyExists)
}
