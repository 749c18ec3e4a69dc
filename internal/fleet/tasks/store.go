package tasks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/kvwatch"
	"github.com/toolpool/toolpool/internal/infra/startstop"
)

// Store is one replica's view of the tasks bucket: it creates tasks, runs
// the ones it owns, answers any task of the bucket, and adopts the tasks
// whose owner's lease lapsed. It is safe for concurrent use.
//
// The bucket holds two keys per task: <id>, the record (a Task as JSON,
// written when the task is created and when it ends), and <id>.lease, the
// owner's claim (small, rewritten every Lease/3 by the owner). Every
// replica watches the leases: that is how an owner learns of a
// cancellation, a waiting Wait of the end of a task, and the sweeper of a
// lease that lapsed.
type Store struct {
	base   startstop.Base
	cfg    Config
	js     js.JetStream
	kv     js.KeyValue
	log    *slog.Logger
	maxRec int  // the largest record written
	msgTTL bool // the bucket takes per-record TTLs

	mu       sync.Mutex
	stopping bool
	running  map[string]*runner   // the tasks this replica runs
	leases   map[string]leaseSeen // every working task's lease, from the watch
	wakes    kvwatch.Wakes        // the Waits, woken at their task's lease change
}

// lease is the value of a task's lease key.
type lease struct {
	// Owner is the instance running the task; "" when handed over.
	Owner string `json:"owner"`
	// Adoptions counts the replicas that took it over.
	Adoptions int `json:"adoptions,omitempty"`
	// Cancel is set by Cancel: the owner cancels the calls.
	Cancel bool `json:"cancel,omitempty"`
}

// leaseSeen is a lease as the watch saw it last.
type leaseSeen struct {
	lease
	rev     uint64
	written time.Time // the server's time of the write
}

// leaseKey is the lease key of the task id.
func leaseKey(id string) string { return id + ".lease" }

// idLen is the length of a task id: 16 random bytes in unpadded URL-safe
// base64.
const idLen = 22

// newID is a random task id.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// validID reports whether id could be a task id: anything else (a
// wildcard, a dot, another length) is not looked up.
func validID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// recordHeadroom is what MaxRecordBytes' default leaves of the server's
// maximum message size for the subject and headers.
const recordHeadroom = 4 << 10

// markerTTL is how long the bucket keeps the marker of a key removed by
// a TTL or a purge.
const markerTTL = time.Minute

// Open binds the bucket (creating it when it does not exist) and starts
// the watch that learns of cancellations and lapsed leases. Stop ends it.
func Open(ctx context.Context, j js.JetStream, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Store{
		cfg: cfg, js: j, log: cfg.Logger,
		running: map[string]*runner{}, leases: map[string]leaseSeen{},
	}
	err := s.base.Start(ctx, func(life context.Context) error {
		if err := s.bind(ctx); err != nil {
			return err
		}
		w, err := s.kv.Watch(life, leaseKey("*"))
		if err != nil {
			return fmt.Errorf("tasks: watch the leases of %s: %w", cfg.Bucket, err)
		}
		s.base.Go(func(life context.Context) { s.watch(life, w) })
		s.base.Go(s.sweep)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// bind binds the bucket, creating it when it does not exist, and reads
// what it allows.
func (s *Store) bind(ctx context.Context) error {
	kv, err := s.js.KeyValue(ctx, s.cfg.Bucket)
	if errors.Is(err, js.ErrBucketNotFound) {
		kc := js.KeyValueConfig{
			Bucket:         s.cfg.Bucket,
			Description:    "toolpool: durable tasks (async HTTP calls, MCP tasks): <id> the record, <id>.lease the owner's claim",
			History:        1,
			TTL:            s.cfg.Retention,
			Storage:        s.cfg.Storage,
			Replicas:       s.cfg.Replicas,
			LimitMarkerTTL: markerTTL, // per-record TTLs
		}
		kv, err = s.js.CreateKeyValue(ctx, kc)
		if errors.Is(err, js.ErrLimitMarkerTTLNotSupported) {
			kc.LimitMarkerTTL = 0 // a server before 2.11: every record is kept Retention
			kv, err = s.js.CreateKeyValue(ctx, kc)
		}
		if errors.Is(err, js.ErrBucketExists) {
			kv, err = s.js.KeyValue(ctx, s.cfg.Bucket) // created meanwhile by another replica
		}
	}
	if err != nil {
		return fmt.Errorf("tasks: open bucket %s: %w", s.cfg.Bucket, err)
	}
	s.kv = kv
	if st, err := kv.Status(ctx); err == nil {
		s.msgTTL = st.LimitMarkerTTL() > 0
		if st.TTL() > 0 {
			s.cfg.Retention = st.TTL() // the bucket's, when it existed
		}
	}
	s.maxRec = s.cfg.MaxRecordBytes
	if s.maxRec == 0 {
		s.maxRec = int(s.js.Conn().MaxPayload()) - recordHeadroom
	}
	return nil
}

// Retention is how long a task's record is kept after it ended: the
// bucket's TTL.
func (s *Store) Retention() time.Duration { return s.cfg.Retention }

// Get returns the task id of tenant; ErrNotFound when there is none (or it
// is another tenant's).
func (s *Store) Get(ctx context.Context, tenant, id string) (Task, error) {
	t, _, err := s.get(ctx, tenant, id)
	return t, err
}

// get is Get with the record's revision.
func (s *Store) get(ctx context.Context, tenant, id string) (Task, uint64, error) {
	if !validID(id) {
		return Task{}, 0, ErrNotFound
	}
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, js.ErrKeyNotFound) || errors.Is(err, js.ErrKeyDeleted) {
		return Task{}, 0, ErrNotFound
	}
	if err != nil {
		return Task{}, 0, fmt.Errorf("tasks: read task: %w", err)
	}
	var t Task
	if err := json.Unmarshal(e.Value(), &t); err != nil {
		return Task{}, 0, fmt.Errorf("tasks: task %s: a record that cannot be read: %w", id, err)
	}
	if t.Request.Tenant != tenant || t.ID != id {
		return Task{}, 0, ErrNotFound // another tenant's: not even its existence is told
	}
	return t, e.Revision(), nil
}

// Wait is Get once the task is no longer working, or once d (capped by
// Config.MaxWait) has passed or ctx is done, whichever comes first; then
// the task is returned as it is (working), without an error.
func (s *Store) Wait(ctx context.Context, tenant, id string, d time.Duration) (Task, error) {
	d = min(d, s.cfg.MaxWait)
	if d <= 0 || !validID(id) {
		return s.Get(ctx, tenant, id)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		changed, release := s.wakes.Hold(id) // before the read: an end after it wakes us
		t, err := s.Get(ctx, tenant, id)
		if err != nil || t.State.Final() {
			release()
			return t, err
		}
		select {
		case <-changed:
			release()
			continue
		case <-timer.C:
			release()
			return s.Get(ctx, tenant, id)
		case <-ctx.Done():
		case <-s.base.Stopping():
		}
		release()
		return t, nil
	}
}

// wake wakes the Waits of the task id.
func (s *Store) wake(id string) { s.wakes.Wake(id) }

// Cancel cancels the task id of tenant: a working task becomes cancelled
// and its calls are cancelled pool-wide by its owner; a task that already
// ended is returned as it is.
func (s *Store) Cancel(ctx context.Context, tenant, id string) (Task, error) {
	for range 10 { // a conflict is a concurrent end or cancel: read again
		t, rev, err := s.get(ctx, tenant, id)
		if err != nil || t.State.Final() {
			return t, err
		}
		t.State, t.CancelRequested, t.Updated = StateCancelled, true, time.Now().UTC()
		t.Error = "cancelled by the client"
		data, err := json.Marshal(t)
		if err != nil {
			return Task{}, fmt.Errorf("tasks: encode task: %w", err)
		}
		_, err = s.write(ctx, id, data, rev, t.TTL)
		if errors.Is(err, js.ErrKeyRevisionMismatch) || errors.Is(err, js.ErrKeyExists) {
			continue
		}
		if err != nil {
			return Task{}, fmt.Errorf("tasks: write task: %w", err)
		}
		s.signalCancel(ctx, id)
		return t, nil
	}
	return Task{}, fmt.Errorf("tasks: task %s: the record kept changing", id)
}

// signalCancel tells the owner of the task id to cancel its calls: at
// once when it is this replica, else through the lease, which the owner
// watches.
func (s *Store) signalCancel(ctx context.Context, id string) {
	s.mu.Lock()
	r := s.running[id]
	s.mu.Unlock()
	if r != nil {
		r.cancelCalls()
	}
	for range 10 {
		e, err := s.kv.Get(ctx, leaseKey(id))
		if err != nil {
			return // no lease: the task ended, nobody runs it
		}
		var l lease
		if json.Unmarshal(e.Value(), &l) != nil || l.Cancel {
			return
		}
		l.Cancel = true
		data, _ := json.Marshal(l)
		if _, err := s.kv.Update(ctx, leaseKey(id), data, e.Revision()); !errors.Is(err, js.ErrKeyRevisionMismatch) {
			return
		}
	}
}

// errCancelled is the cause of a task's Dispatch ctx cancelled by Cancel.
var errCancelled = errors.New("tasks: cancelled by the client")

// write writes a record at revision rev (0: create) with a TTL shorter
// than the bucket's when the bucket takes per-record TTLs.
func (s *Store) write(ctx context.Context, key string, data []byte, rev uint64, ttl time.Duration) (uint64, error) {
	if !s.msgTTL || ttl <= 0 || ttl >= s.cfg.Retention {
		if rev == 0 {
			return s.kv.Create(ctx, key, data)
		}
		return s.kv.Update(ctx, key, data, rev)
	}
	ttl = max(ttl, time.Second) // JetStream's shortest
	m := &nats.Msg{Subject: "$KV." + s.cfg.Bucket + "." + key, Data: data}
	ack, err := s.js.PublishMsg(ctx, m, js.WithExpectLastSequencePerSubject(rev), js.WithMsgTTL(ttl))
	if err != nil {
		var apiErr *js.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == js.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == js.JSErrCodeStreamWrongLastSequenceConstant) {
			return 0, fmt.Errorf("%w: %w", err, js.ErrKeyRevisionMismatch)
		}
		return 0, err
	}
	return ack.Sequence, nil
}

// Stop is the replica leaving: Start fails with ErrStopped, and the tasks
// this replica runs are handed over at once (their lease released) for
// another replica to adopt — or this one again after a restart. Their
// calls are not cancelled: the ones running go on and the adopter
// collects their results; the ones held in this replica's memory are
// dispatched by the adopter. Their Dispatch here ends as at its deadline,
// so the dispatcher's drain does not wait for them.
func (s *Store) Stop(ctx context.Context) error {
	return s.base.Stop(ctx, ErrStopped, func(context.Context) error {
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		return nil
	})
}
