package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/internal/pooltype"
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
	startstop.Base

	cfg     CatalogConfig
	ttl     time.Duration
	watcher js.KeyWatcher
	now     func() time.Time
	nc      *nats.Conn // probes the liveness subjects; nil: no probes

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
	subMu       sync.Mutex
	subs        map[chan struct{}]struct{}
	subsClosed  bool
	lastVersion []Announcement // the live tools the subscribers were last told of
}

var _ pooltype.Catalog = (*Catalog)(nil)

// entry is one live announcement and when this process last heard of it.
type entry struct {
	ann  Announcement
	seen time.Time
	// version is the tool's version as ann tells it (toolVersion), made
	// once here so that Lookup only copies it.
	version string
}

// NewCatalog returns a Catalog for cfg, with defaults applied. It does not
// touch the network: Start does.
func NewCatalog(cfg CatalogConfig) (*Catalog, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Catalog{
		cfg: cfg, now: time.Now,
		live: map[string]map[string]entry{}, known: map[string]struct{}{}, unheard: map[string]*unheard{},
		infos:   map[string]toolSummary{},
		changed: make(chan struct{}, 1), subs: map[chan struct{}]struct{}{},
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
// are read, or with ctx's error. A Catalog starts once.
func (c *Catalog) Start(ctx context.Context) error {
	err := c.Base.Start(ctx, func(life context.Context) error { return c.start(ctx, life) })
	if errors.Is(err, startstop.ErrStarted) || errors.Is(err, startstop.ErrStopped) {
		return fmt.Errorf("discovery: catalog: %w", err)
	}
	return err
}

// start is Start's work: ctx bounds the reading, life is the Catalog's:
// the watch, the probes and the notifications last until it ends.
func (c *Catalog) start(ctx, life context.Context) error {
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
	if err := c.readInitial(ctx, life); err != nil {
		return err
	}
	c.lastVersion = c.Tools(ctx)
	c.Go(func(life context.Context) {
		<-life.Done()
		_ = w.Stop() // ends the updates: run returns
	})
	c.Go(func(context.Context) { c.run() })
	c.Go(c.notifyLoop)
	if c.nc != nil {
		c.Go(c.probeLoop)
	}
	return nil
}

// readInitial applies the announcements in the bucket when the watch
// began, before the Catalog answers anything.
func (c *Catalog) readInitial(ctx, life context.Context) error {
	w := c.watcher
	for {
		select {
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return errors.New("discovery: the bucket watch ended before the announcements were read")
			case e == nil:
				return nil
			}
			c.apply(e)
		case <-ctx.Done():
			_ = w.Stop()
			return fmt.Errorf("discovery: reading the announcements: %w", ctx.Err())
		case <-life.Done(): // Stop came during Start
			_ = w.Stop()
			return fmt.Errorf("discovery: reading the announcements: %w", context.Cause(life))
		}
	}
}

// run applies the bucket's updates until the watch ends.
func (c *Catalog) run() {
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
	if problem := checkPolicy(&ann); problem != "" {
		c.cfg.Logger.Warn("a tool announcement's policy is not valid; applying a safe one", "key", e.Key(), "problem", problem)
	}
	byKey := c.live[tool]
	if byKey == nil {
		byKey = map[string]entry{}
		c.live[tool] = byKey
	}
	now := c.now()
	byKey[e.Key()] = entry{ann: ann, seen: now, version: toolVersion(ann.Version, ann.Tool)}
	c.known[tool] = struct{}{}
	c.infos[tool] = c.summarize(tool, now)
}

// Stop stops watching the bucket and probing the workers, and closes the
// subscribers' channels. It has nothing to drain: it returns nil once the
// watch and the probes have ended, which takes no round trip (ctx bounds
// nothing). A Catalog never started stops too.
func (c *Catalog) Stop(ctx context.Context) error {
	err := c.Base.Stop(ctx, nil, nil)
	c.closeSubscribers()
	return err
}

// TTL is the bucket's TTL in force.
func (c *Catalog) TTL() time.Duration { return c.ttl }
