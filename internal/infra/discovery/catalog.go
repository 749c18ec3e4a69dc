package discovery

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/tools"
)

// CatalogConfig configures a Catalog. Zero fields take the documented
// defaults.
type CatalogConfig struct {
	// JetStream is where the bucket lives. Required.
	JetStream js.JetStream
	// Bucket names the bucket and how to create it if it is missing.
	Bucket BucketConfig
	// Known says whether a tool that no live worker announces exists at
	// all, so that a call to it is answered "no worker serves it right now"
	// rather than "unknown tool"; its Names are consulted. Default: tools
	// with a durable consumer
	// tool_<name> on TOOL_CALLS (ConsumerCatalog). Tools announced
	// once since the Catalog started count as known too.
	Known pooltype.Catalog
	// Logger receives the catalog's warnings. Default slog.Default().
	Logger *slog.Logger
	// ProbeInterval is how often the catalog asks the server whether the
	// workers it counts still subscribe to their liveness subjects
	// (Announcement.Liveness). Default ProbeIntervalDefault; negative:
	// never, and a dead worker counts until its announcement expires.
	ProbeInterval time.Duration
	// GoneAfter is how long a worker's liveness subject must have had no
	// subscriber before the catalog stops counting the worker. Default
	// GoneAfterDefault.
	GoneAfter time.Duration
}

// Defaults of CatalogConfig's liveness probes.
const (
	// ProbeIntervalDefault is how often a Catalog probes the liveness
	// subjects of the workers it counts.
	ProbeIntervalDefault = time.Second
	// GoneAfterDefault is how long a liveness subject must have had no
	// subscriber before its worker stops counting: longer than a worker
	// takes to reconnect to another server of a cluster (its subscription
	// moves with it), far shorter than the announcements' TTL.
	GoneAfterDefault = 5 * time.Second
	// probeTimeout bounds one probe. A probe that times out (a worker whose
	// server has not yet noticed a dead connection, a catalog not allowed
	// to publish there) counts as alive: only the server's "no responders"
	// says a worker is gone.
	probeTimeout = 500 * time.Millisecond
)

// Catalog is the set of live tools: those announced in the bucket by at
// least one worker whose announcement has not expired and whose liveness
// subject, when it announced one, has not been without a subscriber for
// GoneAfter (a worker killed, or its connection gone for good). It watches
// the bucket and probes the liveness subjects in the background, so
// lookups are answered from memory. It implements pooltype.Catalog; Lookup
// of a known tool with no live worker answers false with ToolInfo.NoWorker
// set.
type Catalog struct {
	cfg     CatalogConfig
	ttl     time.Duration
	watcher js.KeyWatcher
	done    chan struct{}
	now     func() time.Time

	nc         *nats.Conn         // probes the liveness subjects; nil: no probes
	stopProbes context.CancelFunc // ends the probe loop
	probesDone chan struct{}      // closed when the probe loop has ended

	started  atomic.Bool // Start was called
	running  atomic.Bool // Start succeeded: Stop has things to end
	stopOnce sync.Once
	stopped  chan struct{}

	mu      sync.RWMutex
	live    map[string]map[string]entry // tool → key → entry
	known   map[string]struct{}         // tools ever announced
	unheard map[string]*unheard         // liveness subject → since when no one subscribes
	// infos are the tools' Lookup answers, made when their announcements
	// or their workers' liveness change (summarize), so that Lookup reads
	// one map entry.
	infos map[string]toolSummary

	// Change notifications (Subscribe): changed is signalled by every
	// update and probe; the notify loop compares the live tools with those
	// it last saw and tells the subscribers when they differ.
	changed     chan struct{}
	notifyDone  chan struct{}
	subMu       sync.Mutex
	subs        map[chan struct{}]struct{}
	subsClosed  bool
	lastVersion []Announcement // the live tools the subscribers were last told of
}

// unheard is a liveness subject the server answered "no responders" for.
type unheard struct {
	since time.Time // the first such answer in a row
	gone  bool      // since GoneAfter or longer: the worker does not count
}

var _ pooltype.Catalog = (*Catalog)(nil)

// entry is one live announcement and when this process last heard of it.
type entry struct {
	ann  Announcement
	seen time.Time
}

// NewCatalog returns a Catalog for cfg, with defaults applied. It does not
// touch the network: Start does.
func NewCatalog(cfg CatalogConfig) (*Catalog, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Catalog{
		cfg: cfg, done: make(chan struct{}), now: time.Now,
		live: map[string]map[string]entry{}, known: map[string]struct{}{}, unheard: map[string]*unheard{},
		infos:      map[string]toolSummary{},
		probesDone: make(chan struct{}), stopped: make(chan struct{}),
		changed: make(chan struct{}, 1), notifyDone: make(chan struct{}), subs: map[chan struct{}]struct{}{},
	}
	if cfg.ProbeInterval > 0 {
		c.nc = cfg.JetStream.Conn()
	}
	return c, nil
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c CatalogConfig) WithDefaults() CatalogConfig {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Known == nil && c.JetStream != nil {
		c.Known = ConsumerCatalog(c.JetStream, 0)
	}
	c.ProbeInterval = cmp.Or(c.ProbeInterval, ProbeIntervalDefault)
	if c.GoneAfter <= 0 {
		c.GoneAfter = GoneAfterDefault
	}
	return c
}

// Validate names the first bad field of c.
func (c CatalogConfig) Validate() error {
	if c.JetStream == nil {
		return errors.New("discovery: CatalogConfig.JetStream is required")
	}
	return nil
}

// Start opens (or creates) the bucket, reads the announcements in it and
// keeps watching it until Stop. It returns once the current announcements
// are read, or with ctx's error.
func (c *Catalog) Start(ctx context.Context) error {
	if c.started.Swap(true) {
		return errors.New("discovery: catalog: already started")
	}
	kv, ttl, err := OpenBucket(ctx, c.cfg.JetStream, c.cfg.Bucket)
	if err != nil {
		return err
	}
	c.ttl = ttl
	// The watch lives until Stop, not until ctx ends.
	w, err := kv.WatchAll(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("discovery: watch bucket: %w", err)
	}
	c.watcher = w
	// Read the current announcements before answering anything.
	for initial := true; initial; {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("discovery: the bucket watch ended before the announcements were read")
			}
			if e == nil {
				initial = false
				break
			}
			c.apply(e)
		case <-ctx.Done():
			_ = w.Stop()
			return fmt.Errorf("discovery: reading the announcements: %w", ctx.Err())
		}
	}
	c.lastVersion = c.Tools(ctx)
	go c.run()
	probeCtx, stop := context.WithCancel(context.Background())
	c.stopProbes = stop
	go c.notifyLoop(probeCtx)
	if c.nc != nil {
		go c.probeLoop(probeCtx)
	} else {
		close(c.probesDone)
	}
	c.running.Store(true)
	return nil
}

// probeLoop probes the liveness subjects every ProbeInterval until ctx
// ends.
func (c *Catalog) probeLoop(ctx context.Context) {
	defer close(c.probesDone)
	t := time.NewTicker(c.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.probe(ctx)
		c.signal() // also the clock: an announcement may have expired
	}
}

// probe asks the server, once for each worker counted now, whether anyone
// subscribes to its liveness subject, and records the answers.
func (c *Catalog) probe(ctx context.Context) {
	now := c.now()
	workers := map[string]string{} // liveness subject → worker id
	c.mu.RLock()
	for _, byKey := range c.live {
		for _, e := range byKey {
			if now.Sub(e.seen) < c.ttl && validLiveness(e.ann.Liveness) {
				workers[e.ann.Liveness] = e.ann.WorkerID
			}
		}
	}
	c.mu.RUnlock()
	var (
		mu     sync.Mutex
		nobody = map[string]bool{} // subject → the server said no responders
		wg     sync.WaitGroup
	)
	for subject := range workers {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, probeTimeout)
			_, err := c.nc.RequestWithContext(pctx, subject, nil)
			cancel()
			mu.Lock()
			nobody[subject] = errors.Is(err, nats.ErrNoResponders)
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	now = c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	// A probe that failed otherwise (a timeout, our own connection away)
	// restarts the subject's clock: after an outage, workers get all of
	// GoneAfter to reconnect from when this catalog is back.
	for subject, u := range c.unheard {
		none, probed := nobody[subject]
		if none {
			continue
		}
		if probed && u.gone {
			c.cfg.Logger.Info("a worker is connected again; its tools count again", "worker_id", workers[subject])
		}
		delete(c.unheard, subject) // it is there, or not announced any more
	}
	for subject, none := range nobody {
		if !none {
			continue
		}
		u := c.unheard[subject]
		if u == nil {
			u = &unheard{since: now}
			c.unheard[subject] = u
		}
		if !u.gone && now.Sub(u.since) >= c.cfg.GoneAfter {
			u.gone = true
			c.cfg.Logger.Warn("a worker's NATS connection is gone; its tools no longer count it",
				"worker_id", workers[subject], "for", now.Sub(u.since).Round(time.Millisecond))
		}
	}
	for tool := range c.live {
		c.infos[tool] = c.summarize(tool, now)
	}
}

// run applies the bucket's updates until the watch ends.
func (c *Catalog) run() {
	defer close(c.done)
	for e := range c.watcher.Updates() {
		if e != nil {
			c.apply(e)
			c.signal()
		}
	}
}

// apply records one update of the bucket.
func (c *Catalog) apply(e js.KeyValueEntry) {
	tool, ok := splitKey(e.Key())
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Operation() != js.KeyValuePut {
		if byKey := c.live[tool]; byKey != nil {
			delete(byKey, e.Key())
			if len(byKey) == 0 {
				delete(c.live, tool)
			}
		}
		c.infos[tool] = c.summarize(tool, c.now())
		return
	}
	ann, err := decodeAnnouncement(e.Value())
	if err != nil || ann.Tool.Name != tool {
		c.cfg.Logger.Warn("ignoring a malformed tool announcement", "key", e.Key(), "err", err)
		return
	}
	byKey := c.live[tool]
	if byKey == nil {
		byKey = map[string]entry{}
		c.live[tool] = byKey
	}
	now := c.now()
	byKey[e.Key()] = entry{ann: ann, seen: now}
	c.known[tool] = struct{}{}
	c.infos[tool] = c.summarize(tool, now)
}

// toolSummary is what Lookup answers for a tool with live workers, good
// until one of the announcements it counts expires.
type toolSummary struct {
	info    pooltype.ToolInfo
	workers int       // live workers counted
	until   time.Time // the first expiry among them
}

// summarize sums up the live workers of tool at now; c.mu is held. The
// tool's settings (concurrency, fairness, per-key limits) are those of
// its most recently started worker, as in Tools; its slots are the sum of
// its live workers' (Announcement.Slots), capped by its concurrency, or 0
// (not known) when a worker announced none.
func (c *Catalog) summarize(tool string, now time.Time) toolSummary {
	var (
		s      = toolSummary{info: pooltype.ToolInfo{Name: tool}}
		newest Announcement
		slots  int
		noSlot bool
	)
	for _, e := range c.live[tool] {
		if !c.alive(e, now) {
			continue
		}
		if s.workers == 0 || e.ann.StartedAt.After(newest.StartedAt) ||
			e.ann.StartedAt.Equal(newest.StartedAt) && e.ann.WorkerID > newest.WorkerID {
			newest = e.ann
		}
		if exp := e.seen.Add(c.ttl); s.workers == 0 || exp.Before(s.until) {
			s.until = exp
		}
		s.workers++
		slots += e.ann.Slots
		noSlot = noSlot || e.ann.Slots <= 0
	}
	if s.workers == 0 {
		return s
	}
	if !noSlot {
		s.info.Slots = slots
		if newest.Concurrency > 0 {
			s.info.Slots = min(slots, newest.Concurrency)
		}
	}
	s.info.Fairness = newest.Fairness
	if newest.PerKey != nil {
		s.info.PerKey = *newest.PerKey
	}
	return s
}

// Stop stops watching the bucket and probing the workers. It has nothing
// to drain: it returns at once, nil, and ctx only bounds the wait for the
// watch to end. A Catalog never started stops too.
func (c *Catalog) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		defer close(c.stopped)
		if !c.running.Load() {
			return
		}
		c.stopProbes()
		<-c.probesDone
		<-c.notifyDone
		_ = c.watcher.Stop()
		<-c.done
	})
	c.closeSubscribers()
	select {
	case <-c.stopped:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Stopped is closed once Stop has ended the watch and the probes.
func (c *Catalog) Stopped() <-chan struct{} { return c.stopped }

// TTL is the bucket's TTL in force.
func (c *Catalog) TTL() time.Duration { return c.ttl }

// alive reports whether e is still live: its worker refreshes it every
// TTL/3, and the server removes it one TTL after the last refresh; this
// clock check covers a server that keeps no expiry markers, or a watch
// that stalled. An entry whose worker's liveness subject has been without
// a subscriber for GoneAfter is not live either.
func (c *Catalog) alive(e entry, now time.Time) bool {
	if u := c.unheard[e.ann.Liveness]; u != nil && u.gone {
		return false
	}
	return now.Sub(e.seen) < c.ttl
}

// liveWorkers returns the live announcements of tool, sorted by worker id.
func (c *Catalog) liveWorkers(tool string, now time.Time) []Announcement {
	var out []Announcement
	for _, e := range c.live[tool] {
		if c.alive(e, now) {
			out = append(out, e.ann)
		}
	}
	slices.SortFunc(out, func(a, b Announcement) int {
		if a.WorkerID != b.WorkerID {
			if a.WorkerID < b.WorkerID {
				return -1
			}
			return 1
		}
		return 0
	})
	return out
}

// Lookup reports whether at least one live worker serves name, with the
// tool's fleet slots (the sum of its live workers' Announcement.Slots,
// capped by its concurrency; 0 when a worker did not announce its slots),
// fairness key and per-key limits, as its most recently started worker
// announced them. When no worker serves it but the tool is known (see
// CatalogConfig.Known), it answers false with ToolInfo.NoWorker set.
func (c *Catalog) Lookup(ctx context.Context, name string) (pooltype.ToolInfo, bool) {
	now := c.now()
	c.mu.RLock()
	s, ok := c.infos[name]
	if !ok || !now.Before(s.until) {
		s = c.summarize(name, now) // an announcement expired since: count again
	}
	_, seen := c.known[name]
	c.mu.RUnlock()
	if s.workers > 0 {
		return s.info, true
	}
	if seen {
		return pooltype.ToolInfo{Name: name, NoWorker: true}, false
	}
	// Names, not Lookup: a catalog that cannot tell (JetStream down) may
	// say yes to every name in Lookup, but lists nothing.
	if slices.Contains(c.cfg.Known.Names(ctx), name) {
		return pooltype.ToolInfo{Name: name, NoWorker: true}, false
	}
	return pooltype.ToolInfo{}, false
}

// Names lists the tools at least one live worker serves, sorted.
func (c *Catalog) Names(context.Context) []string {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var names []string
	for _, tool := range slices.Sorted(maps.Keys(c.live)) {
		if len(c.liveWorkers(tool, now)) > 0 {
			names = append(names, tool)
		}
	}
	return names
}

// Definitions returns one definition per live tool, sorted by name. When
// workers announce different definitions of a tool (during a deploy), the
// one of the most recently started worker wins.
func (c *Catalog) Definitions(ctx context.Context) []tools.Definition {
	anns := c.Tools(ctx)
	defs := make([]tools.Definition, 0, len(anns))
	for _, a := range anns {
		defs = append(defs, a.Tool)
	}
	if len(defs) == 0 {
		return nil
	}
	return defs
}

// Tools returns one announcement per live tool, sorted by tool name: that
// of the most recently started worker serving it (see Definitions). Its
// WorkerID and Liveness are that worker's; the rest describes the tool.
func (c *Catalog) Tools(context.Context) []Announcement {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Announcement
	for _, tool := range slices.Sorted(maps.Keys(c.live)) {
		ws := c.liveWorkers(tool, now)
		if len(ws) == 0 {
			continue
		}
		newest := ws[0]
		for _, a := range ws[1:] {
			if a.StartedAt.After(newest.StartedAt) {
				newest = a
			}
		}
		out = append(out, newest)
	}
	return out
}

// Workers returns the live announcements of tool, one per worker, sorted by
// worker id.
func (c *Catalog) Workers(_ context.Context, tool string) []Announcement {
	now := c.now()
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.liveWorkers(tool, now)
}

// Subscribe returns a channel that receives a value whenever the live
// tools change: a tool gets its first live worker or loses its last one,
// or its definition (as Tools reports it) changes. Values are coalesced:
// a receiver that is busy gets one value for many changes, and reads
// Tools again. The channel is closed by cancel and once the Catalog
// stops. Changes are noticed as the bucket's updates arrive and, for
// workers that are gone without withdrawing, at the next liveness probe
// (ProbeInterval) or when their announcements expire.
func (c *Catalog) Subscribe() (changes <-chan struct{}, cancel func()) {
	ch := make(chan struct{}, 1)
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.subsClosed {
		close(ch)
		return ch, func() {}
	}
	c.subs[ch] = struct{}{}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			c.subMu.Lock()
			defer c.subMu.Unlock()
			if _, ok := c.subs[ch]; ok {
				delete(c.subs, ch)
				close(ch)
			}
		})
	}
}

// signal tells the notify loop that the live tools may have changed.
func (c *Catalog) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// notifyLoop tells the subscribers of the changes signal reports, until
// ctx ends. Without probes, a ticker makes it notice expired
// announcements.
func (c *Catalog) notifyLoop(ctx context.Context) {
	defer close(c.notifyDone)
	var tick <-chan time.Time
	if c.nc == nil {
		t := time.NewTicker(max(c.ttl/3, time.Second))
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.changed:
		case <-tick:
		}
		c.subMu.Lock()
		n := len(c.subs)
		c.subMu.Unlock()
		if n == 0 {
			continue
		}
		now := c.Tools(ctx)
		if sameTools(now, c.lastVersion) {
			continue
		}
		c.lastVersion = now
		c.subMu.Lock()
		for ch := range c.subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		c.subMu.Unlock()
	}
}

// closeSubscribers closes every subscriber's channel: the Catalog stopped.
func (c *Catalog) closeSubscribers() {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	c.subsClosed = true
	for ch := range c.subs {
		close(ch)
		delete(c.subs, ch)
	}
}

// sameTools reports whether a and b describe the same tools (what the
// model sees of them, and their hints), whichever workers announced them.
func sameTools(a, b []Announcement) bool {
	return slices.EqualFunc(a, b, func(x, y Announcement) bool {
		return x.Tool.Name == y.Tool.Name && x.Tool.Description == y.Tool.Description &&
			bytes.Equal(x.Tool.InputSchema, y.Tool.InputSchema) && x.Idempotent == y.Idempotent
	})
}
