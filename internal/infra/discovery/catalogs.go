package discovery

import (
	"context"
	"github.com/toolpool/toolpool/internal/pooltype"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/tools"
)

// CatalogTTLDefault is how long ConsumerCatalog trusts one listing of the
// tool consumers.
const CatalogTTLDefault = 2 * time.Second

// catalogListTimeout bounds one listing of the consumers.
const catalogListTimeout = 2 * time.Second

// RegistryCatalog is the Catalog of the tools registered in reg, for a pool
// whose workers serve exactly those tools (the in-process setup). A tool's
// pooltype.ToolInfo carries its fairness key, per-key limits, cost, cache
// and approval rule, and its Concurrency as its Slots (see
// RegistryCatalogWithSlots); a tool with a cache also its Version (this
// binary's build and the tool's definition, as the discovery Catalog
// answers it), made once per registered tool.
func RegistryCatalog(reg *tools.Registry) pooltype.Catalog { return RegistryCatalogWithSlots(reg, 0) }

// RegistryCatalogWithSlots is RegistryCatalog for a pool whose workers run
// slots calls at once in all (the sum of their worker.Config.Concurrency):
// a tool's Slots are the lesser of its Concurrency and slots. slots <= 0
// is RegistryCatalog.
func RegistryCatalogWithSlots(reg *tools.Registry, slots int) pooltype.Catalog {
	return registryCatalog{reg: reg, slots: max(slots, 0), versions: new(sync.Map)}
}

type registryCatalog struct {
	reg      *tools.Registry
	slots    int       // the workers' slots in all; 0: not known
	versions *sync.Map // *tools.Registered → its toolVersion
}

func (c registryCatalog) Lookup(_ context.Context, name string) (pooltype.ToolInfo, bool) {
	rt, ok := c.reg.Lookup(name)
	if !ok {
		return pooltype.ToolInfo{}, false
	}
	slots := rt.Concurrency
	if c.slots > 0 {
		slots = min(slots, c.slots)
	}
	info := pooltype.ToolInfo{
		Name: name, Slots: slots, Fairness: rt.Fairness, PerKey: rt.PerKey,
		Cost: rt.Cost, Cache: rt.Cache, Approval: rt.Approval,
	}
	if rt.Cache != nil {
		info.Version = c.version(rt)
	}
	return info, true
}

// version is rt's toolVersion under this binary's build, made on its first
// look-up.
func (c registryCatalog) version(rt *tools.Registered) string {
	if v, ok := c.versions.Load(rt); ok {
		return v.(string)
	}
	v := toolVersion(BuildVersion(), rt.Definition())
	c.versions.Store(rt, v)
	return v
}

func (c registryCatalog) Names(context.Context) []string { return c.reg.Names() }

// StaticCatalog is a Catalog of a fixed list of tool names.
func StaticCatalog(names ...string) pooltype.Catalog {
	s := staticCatalog{set: make(map[string]struct{}, len(names))}
	for _, n := range names {
		s.set[n] = struct{}{}
	}
	s.names = slices.Sorted(maps.Keys(s.set))
	return s
}

type staticCatalog struct {
	set   map[string]struct{}
	names []string
}

func (c staticCatalog) Lookup(_ context.Context, name string) (pooltype.ToolInfo, bool) {
	if _, ok := c.set[name]; !ok {
		return pooltype.ToolInfo{}, false
	}
	return pooltype.ToolInfo{Name: name}, true
}

func (c staticCatalog) Names(context.Context) []string { return slices.Clone(c.names) }

// ConsumerCatalog is the Catalog of the tools that have a durable consumer
// tool_<tool> on TOOL_CALLS: until workers announce themselves in a live
// discovery bucket, a tool with a consumer counts as served. The listing is
// cached for ttl (CatalogTTLDefault when ttl <= 0); one caller refreshes it
// while the others keep using the previous listing.
//
// When the consumers cannot be listed and no listing ever succeeded, Lookup
// answers yes for every tool (fail open): the call is then published, and
// whether the pool can take it is decided by the publish, which fails with
// ErrUnavailable when JetStream is down. Names is empty in that case.
func ConsumerCatalog(j js.JetStream, ttl time.Duration) pooltype.Catalog {
	if ttl <= 0 {
		ttl = CatalogTTLDefault
	}
	return &consumerCatalog{js: j, ttl: ttl, listTimeout: catalogListTimeout, now: time.Now}
}

type consumerCatalog struct {
	js          js.JetStream
	ttl         time.Duration
	listTimeout time.Duration
	now         func() time.Time

	refresh sync.Mutex // held by the one caller listing the consumers
	snap    atomic.Pointer[catalogSnapshot]
}

type catalogSnapshot struct {
	at    time.Time
	ok    bool // the listing succeeded
	set   map[string]struct{}
	names []string
}

func (c *consumerCatalog) Lookup(ctx context.Context, name string) (pooltype.ToolInfo, bool) {
	s := c.current(ctx)
	if !s.ok {
		return pooltype.ToolInfo{Name: name}, true
	}
	if _, ok := s.set[name]; !ok {
		return pooltype.ToolInfo{}, false
	}
	return pooltype.ToolInfo{Name: name}, true
}

func (c *consumerCatalog) Names(ctx context.Context) []string {
	return slices.Clone(c.current(ctx).names)
}

// current returns a listing no older than ttl if it can, else the previous one.
func (c *consumerCatalog) current(ctx context.Context) *catalogSnapshot {
	s := c.snap.Load()
	if s != nil && c.now().Sub(s.at) < c.ttl {
		return s
	}
	if s != nil {
		if !c.refresh.TryLock() {
			return s // another caller is listing; use the previous listing meanwhile
		}
	} else {
		c.refresh.Lock()
	}
	defer c.refresh.Unlock()
	if s2 := c.snap.Load(); s2 != nil && c.now().Sub(s2.at) < c.ttl {
		return s2
	}
	next := c.list(ctx)
	if !next.ok && s != nil && s.ok {
		// Keep the last good listing, and try again after ttl.
		kept := *s
		kept.at = next.at
		next = &kept
	}
	c.snap.Store(next)
	return next
}

func (c *consumerCatalog) list(ctx context.Context) *catalogSnapshot {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.listTimeout)
	defer cancel()
	snap := &catalogSnapshot{set: make(map[string]struct{})}
	stream, err := c.js.Stream(ctx, jetstream.StreamCalls)
	if err == nil {
		lister := stream.ConsumerNames(ctx)
		for name := range lister.Name() {
			if tool, ok := strings.CutPrefix(name, jetstream.ConsumerPrefix); ok && tool != "" {
				snap.set[tool] = struct{}{}
			}
		}
		err = lister.Err()
	}
	snap.at = c.now()
	if err != nil {
		return &catalogSnapshot{at: snap.at}
	}
	snap.ok = true
	snap.names = slices.Sorted(maps.Keys(snap.set))
	return snap
}
