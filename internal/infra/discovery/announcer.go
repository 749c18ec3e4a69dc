package discovery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

// PutTimeoutDefault bounds each write of an announcement.
const PutTimeoutDefault = 5 * time.Second

// AnnouncerConfig configures an Announcer. Zero fields take the documented
// defaults.
type AnnouncerConfig struct {
	// JetStream is where the bucket lives. Required.
	JetStream js.JetStream
	// Registry holds the tools the worker serves. Required.
	Registry *tools.Registry
	// Tools limits the announcement to these tools of the registry (the
	// worker's Config.Tools). Default: all.
	Tools []string
	// WorkerID is the worker's id, as in its results. Required.
	WorkerID string
	// Slots is how many calls the worker runs at once over all its tools
	// (worker.Config.Concurrency), announced with each tool
	// (Announcement.Slots) so that orchestrators know the fleet's slots.
	// Default 0: not known (orchestrators then publish the tool's calls
	// without a fair-share window).
	Slots int
	// Bucket names the bucket and how to create it.
	Bucket BucketConfig
	// PutTimeout bounds each write. Default PutTimeoutDefault.
	PutTimeout time.Duration
	// Logger receives the announcer's warnings. Default slog.Default().
	Logger *slog.Logger
}

// Announcer keeps a worker's tools announced in the live-tools bucket:
// Start writes one key per tool, a heartbeat rewrites them every TTL/3 so
// they do not expire, and Stop deletes them. A worker that dies without
// Stop disappears when its keys expire, one TTL after its last heartbeat,
// or sooner for the catalogs that probe its liveness subject (see
// LivenessPrefix): Start subscribes to it on the worker's connection, so
// the subscription ends with the connection.
type Announcer struct {
	startstop.Base

	cfg      AnnouncerConfig
	liveness string // the subject Start subscribes to

	valuesMu  sync.Mutex              // guards anns, values, announced: Update changes them
	anns      map[string]Announcement // key → announcement
	values    map[string][]byte       // key → announcement JSON; set by Start
	announced string                  // the liveness subject the values name; set by Start

	mu  sync.Mutex
	sub *nats.Subscription // on liveness; nil when it could not be made
	kv  js.KeyValue        // nil until announced (the heartbeat keeps trying)
	ttl time.Duration

	// The heartbeat ends before Stop withdraws the announcements: endBeat
	// cancels it, and beatDone is closed once it has returned.
	endBeat  context.CancelFunc
	beatDone chan struct{}
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c AnnouncerConfig) WithDefaults() AnnouncerConfig {
	c.PutTimeout = cmp.Or(c.PutTimeout, PutTimeoutDefault)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate names the first bad field of c.
func (c AnnouncerConfig) Validate() error {
	switch {
	case c.JetStream == nil:
		return errors.New("discovery: AnnouncerConfig.JetStream is required")
	case c.Registry == nil:
		return errors.New("discovery: AnnouncerConfig.Registry is required")
	case c.WorkerID == "":
		return errors.New("discovery: AnnouncerConfig.WorkerID is required")
	case c.Slots < 0:
		return fmt.Errorf("discovery: AnnouncerConfig.Slots must be >= 0, got %d", c.Slots)
	}
	return c.Bucket.withDefaults().validate()
}

// announcementOf is the announcement of rt by this worker, with its slots.
func (c AnnouncerConfig) announcementOf(rt *tools.Registered, startedAt time.Time) Announcement {
	a := AnnouncementOf(rt, c.WorkerID, startedAt)
	a.Slots = c.Slots
	return a
}

// NewAnnouncer checks cfg and returns an announcer. It does not touch the
// network.
func NewAnnouncer(cfg AnnouncerConfig) (*Announcer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	names := cfg.Tools
	if len(names) == 0 {
		names = cfg.Registry.Names()
	}
	startedAt := time.Now().UTC()
	anns := make(map[string]Announcement, len(names))
	for _, name := range names {
		rt, ok := cfg.Registry.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("discovery: AnnouncerConfig.Tools names %q, which is not in the registry", name)
		}
		anns[Key(name, cfg.WorkerID)] = cfg.announcementOf(rt, startedAt)
	}
	a := &Announcer{cfg: cfg, anns: anns, liveness: LivenessPrefix + nuid.Next(), beatDone: make(chan struct{})}
	if _, err := a.encode(""); err != nil {
		return nil, err
	}
	return a, nil
}

// encode marshals the announcements, naming the liveness subject when it
// is not empty.
func (a *Announcer) encode(liveness string) (map[string][]byte, error) {
	values := make(map[string][]byte, len(a.anns))
	for key, ann := range a.anns {
		ann.Liveness = liveness
		data, err := json.Marshal(ann)
		if err != nil {
			return nil, fmt.Errorf("discovery: announcement of %q: %w", ann.Tool.Name, err)
		}
		values[key] = data
	}
	return values, nil
}

// subscribeLiveness subscribes to the liveness subject on the worker's
// connection and returns the subject to announce: empty when the
// subscription could not be made or the server refused it (a user not
// allowed to subscribe there), so that no catalog takes the missing
// subscriber for a dead worker.
func (a *Announcer) subscribeLiveness(ctx context.Context) string {
	nc := a.cfg.JetStream.Conn()
	if nc == nil {
		return ""
	}
	// Catalogs only ask whether anyone subscribes (a request with no
	// subscriber is answered "no responders" by the server): nothing is
	// sent back, so the worker needs no permission to reply.
	sub, err := nc.Subscribe(a.liveness, func(*nats.Msg) {})
	if err == nil {
		fctx, cancel := context.WithTimeout(ctx, a.cfg.PutTimeout)
		err = nc.FlushWithContext(fctx) // a refusal arrives before the flush's PONG
		cancel()
		if err == nil {
			if last := nc.LastError(); errors.Is(last, nats.ErrPermissionViolation) && strings.Contains(last.Error(), a.liveness) {
				err = last
			}
		}
		if err != nil {
			_ = sub.Unsubscribe()
		}
	}
	if err != nil {
		a.cfg.Logger.Warn("no liveness subject: a crash of this worker is noticed when its announcements expire",
			"worker_id", a.cfg.WorkerID, "subject", a.liveness, "err", err)
		return ""
	}
	a.sub = sub
	return a.liveness
}

// Start opens (or creates) the bucket, announces every tool once and starts
// the heartbeat. It fails when the bucket or the first announcement cannot
// be written for a reason that will not pass (a permissions violation, a
// bucket of another kind); when JetStream is only unavailable for now (a
// stream leader being elected, a timeout), Start logs it and returns nil,
// and the heartbeat keeps trying: a worker can serve calls before its tools
// are announced. An Announcer starts once.
func (a *Announcer) Start(ctx context.Context) error {
	// Not bounded by ctx as such: a ctx already over is a JetStream that
	// did not answer in time, and Start succeeds then too.
	err := a.Base.Start(context.WithoutCancel(ctx), func(life context.Context) error { return a.start(ctx, life) })
	if errors.Is(err, startstop.ErrStarted) || errors.Is(err, startstop.ErrStopped) {
		return fmt.Errorf("discovery: announcer: %w", err)
	}
	return err
}

// start is Start's work: ctx bounds the first announcement, life is the
// heartbeat's.
func (a *Announcer) start(ctx, life context.Context) error {
	live := a.subscribeLiveness(ctx)
	a.valuesMu.Lock()
	values, err := a.encode(live)
	if err == nil {
		a.values, a.announced = values, live
	}
	a.valuesMu.Unlock()
	if err != nil {
		a.unsubscribe()
		return err
	}
	kv, ttl, err := OpenBucket(ctx, a.cfg.JetStream, a.cfg.Bucket)
	if err == nil {
		err = a.putAll(ctx, kv)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err == nil:
		a.kv, a.ttl = kv, ttl
	case jetstream.Transient(err):
		a.kv, a.ttl = nil, a.cfg.Bucket.withDefaults().TTL
		a.cfg.Logger.Warn("announcing the worker's tools failed; retrying at the next heartbeat",
			"worker_id", a.cfg.WorkerID, "err", err)
	default:
		if kv != nil {
			// Some announcements may be out (a signal cancelled ctx halfway):
			// take them back, so no one counts a worker that is not there.
			wctx, cancel := context.WithTimeout(context.Background(), a.cfg.PutTimeout)
			_ = a.withdraw(wctx, kv)
			cancel()
		}
		a.unsubscribe()
		return err
	}
	beat, end := context.WithCancel(life)
	a.endBeat = end
	a.Go(func(context.Context) { a.heartbeat(beat) })
	return nil
}

// Update replaces the announcements of those tools of rts this announcer
// announces (their description or schema changed: an MCP server's tool
// list did) and writes them at once; tools it does not announce are
// ignored. Before Start it changes what Start writes; when the bucket
// cannot be written now, the heartbeat writes them later.
func (a *Announcer) Update(ctx context.Context, rts ...*tools.Registered) error {
	a.valuesMu.Lock()
	changed := map[string][]byte{}
	for _, rt := range rts {
		key := Key(rt.Name, a.cfg.WorkerID)
		old, ok := a.anns[key]
		if !ok {
			continue
		}
		ann := a.cfg.announcementOf(rt, old.StartedAt)
		a.anns[key] = ann
		if a.values == nil {
			continue // not started: Start encodes anns
		}
		ann.Liveness = a.announced
		data, err := json.Marshal(ann)
		if err != nil {
			a.valuesMu.Unlock()
			return fmt.Errorf("discovery: announcement of %q: %w", rt.Name, err)
		}
		a.values[key] = data
		changed[key] = data
	}
	a.valuesMu.Unlock()
	kv := a.bucket()
	if kv == nil || len(changed) == 0 {
		return nil
	}
	return a.put(ctx, kv, changed)
}

// Add announces the tools of rts from now on (the worker serves them: an
// MCP server added them), writing them at once; a tool announced already
// gets its announcement replaced, as with Update. Before Start it changes
// what Start writes; when the bucket cannot be written now, the heartbeat
// writes them later.
func (a *Announcer) Add(ctx context.Context, rts ...*tools.Registered) error {
	a.valuesMu.Lock()
	now := time.Now().UTC()
	for _, rt := range rts {
		key := Key(rt.Name, a.cfg.WorkerID)
		if _, ok := a.anns[key]; !ok {
			a.anns[key] = Announcement{StartedAt: now} // Update keeps StartedAt
		}
	}
	a.valuesMu.Unlock()
	return a.Update(ctx, rts...)
}

// Withdraw stops announcing the tools names (the worker no longer serves
// them) and deletes their announcements at once, so catalogs stop counting
// this worker for them. Tools it does not announce are ignored. When the
// bucket cannot be written now, the announcements expire on their own.
func (a *Announcer) Withdraw(ctx context.Context, names ...string) error {
	a.valuesMu.Lock()
	var keys []string
	for _, name := range names {
		key := Key(name, a.cfg.WorkerID)
		if _, ok := a.anns[key]; !ok {
			continue
		}
		delete(a.anns, key)
		delete(a.values, key)
		keys = append(keys, key)
	}
	a.valuesMu.Unlock()
	kv := a.bucket()
	if kv == nil || len(keys) == 0 {
		return nil
	}
	return deleteKeys(ctx, kv, keys, a.cfg.PutTimeout)
}

// bucket is the bucket to write announcements to now: nil before Start,
// once Stop has begun, and while the bucket could not be opened.
func (a *Announcer) bucket() js.KeyValue {
	if !a.Running() {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.kv
}

// TTL is the bucket's TTL in force; 0 before Start.
func (a *Announcer) TTL() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ttl
}

// putAll writes every announcement.
func (a *Announcer) putAll(ctx context.Context, kv js.KeyValue) error {
	return a.put(ctx, kv, a.snapshot())
}

// snapshot is a copy of the announcements' JSON, by key.
func (a *Announcer) snapshot() map[string][]byte {
	a.valuesMu.Lock()
	defer a.valuesMu.Unlock()
	values := make(map[string][]byte, len(a.values))
	for key, value := range a.values {
		values[key] = value
	}
	return values
}

// put writes values.
func (a *Announcer) put(ctx context.Context, kv js.KeyValue, values map[string][]byte) error {
	for key, value := range values {
		pctx, cancel := context.WithTimeout(ctx, a.cfg.PutTimeout)
		_, err := kv.Put(pctx, key, value)
		cancel()
		if err != nil {
			return fmt.Errorf("discovery: announce %s: %w", key, err)
		}
	}
	return nil
}

// heartbeat rewrites the announcements every TTL/3 until Stop.
func (a *Announcer) heartbeat(ctx context.Context) {
	defer close(a.beatDone)
	a.mu.Lock()
	kv, ttl := a.kv, a.ttl
	a.mu.Unlock()
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	failing := kv == nil // Start could not announce
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var err error = js.ErrBucketNotFound
		if kv != nil {
			err = a.putAll(ctx, kv)
		}
		if errors.Is(err, js.ErrBucketNotFound) || errors.Is(err, js.ErrStreamNotFound) || errors.Is(err, js.ErrNoStreamResponse) {
			// The bucket is gone (deleted by hand, or a server without it):
			// make it again.
			octx, cancel := context.WithTimeout(ctx, a.cfg.PutTimeout)
			nkv, nttl, oerr := OpenBucket(octx, a.cfg.JetStream, a.cfg.Bucket)
			cancel()
			if oerr == nil {
				kv = nkv
				if nttl != ttl { // the bucket keeps its own TTL
					ttl = nttl
					t.Reset(ttl / 3)
				}
				a.mu.Lock()
				a.kv, a.ttl = kv, ttl // for Stop and TTL
				a.mu.Unlock()
				err = a.putAll(ctx, kv)
			} else if kv == nil {
				err = oerr
			}
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			a.cfg.Logger.Warn("announcing the worker's tools failed; retrying at the next heartbeat",
				"worker_id", a.cfg.WorkerID, "err", err)
		case err == nil && failing:
			failing = false
			a.cfg.Logger.Info("announcing the worker's tools works again", "worker_id", a.cfg.WorkerID)
		}
	}
}

// Stop ends the heartbeat and deletes the announcements, so the tools stop
// counting this worker at once. Call it before the worker stops pulling.
// It is safe to call more than once (a second Stop returns the first's
// error); an announcer that was never started has nothing to delete.
func (a *Announcer) Stop(ctx context.Context) error {
	return a.Base.Stop(ctx, nil, a.withdrawAll)
}

// withdrawAll is Stop's drain: the heartbeat ends, then the announcements
// are withdrawn, then the liveness subject: a catalog never sees the
// announcements of a worker without its subscriber.
func (a *Announcer) withdrawAll(ctx context.Context) error {
	a.endBeat()
	<-a.beatDone
	a.mu.Lock()
	kv := a.kv // the heartbeat may have (re)opened the bucket
	a.mu.Unlock()
	defer a.unsubscribe()
	if kv == nil {
		return nil // never announced
	}
	return a.withdraw(ctx, kv)
}

// unsubscribe ends the liveness subscription, if any.
func (a *Announcer) unsubscribe() {
	if a.sub != nil {
		_ = a.sub.Unsubscribe()
		a.sub = nil
	}
}

// withdraw deletes every announcement of the worker, all at once: a worker
// serving many tools withdraws them in one round trip, not one per tool,
// however slow the server is to answer.
func (a *Announcer) withdraw(ctx context.Context, kv js.KeyValue) error {
	var keys []string
	for key := range a.snapshot() {
		keys = append(keys, key)
	}
	return deleteKeys(ctx, kv, keys, a.cfg.PutTimeout)
}

// deleteKeys deletes keys from kv all at once, each bounded by timeout.
func deleteKeys(ctx context.Context, kv js.KeyValue, keys []string, timeout time.Duration) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, key := range keys {
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			if err := kv.Delete(dctx, key); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("discovery: withdraw %s: %w", key, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
