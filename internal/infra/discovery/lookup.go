package discovery

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/tools"
)

// toolSummary is what Lookup answers for a tool with live workers, good
// until one of the announcements it counts expires.
type toolSummary struct {
	info    pooltype.ToolInfo
	workers int       // live workers counted
	until   time.Time // the first expiry among them
}

// summarize sums up the live workers of tool at now; c.mu is held. The
// tool's settings (concurrency, fairness, per-key limits, cost, cache,
// approval) and version are those of its most recently started worker, as
// in Tools; its slots are the sum of
// its live workers' (Announcement.Slots), capped by its concurrency, or 0
// (not known) when a worker announced none.
func (c *Catalog) summarize(tool string, now time.Time) toolSummary {
	var (
		s      = toolSummary{info: pooltype.ToolInfo{Name: tool}}
		newest entry
		slots  int
		noSlot bool
	)
	for _, e := range c.live[tool] {
		if !c.alive(e, now) {
			continue
		}
		if s.workers == 0 || newer(e.ann, newest.ann) {
			newest = e
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
	ann := &newest.ann
	if !noSlot {
		s.info.Slots = slots
		if ann.Concurrency > 0 {
			s.info.Slots = min(slots, ann.Concurrency)
		}
	}
	s.info.Fairness = ann.Fairness
	if ann.PerKey != nil {
		s.info.PerKey = *ann.PerKey
	}
	s.info.Cost, s.info.Cache, s.info.Approval = ann.Cost, ann.Cache, ann.Approval
	s.info.Version = newest.version
	return s
}

// newer reports whether a was announced by a more recently started worker
// than b: the one whose settings and definition count (Lookup, Tools). Of
// two started at the same instant, the greater worker id wins.
func newer(a, b Announcement) bool {
	return a.StartedAt.After(b.StartedAt) || a.StartedAt.Equal(b.StartedAt) && a.WorkerID > b.WorkerID
}

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
// fairness key, per-key limits, cost, cache and approval rule, as its most
// recently started worker announced them, and its Version: a digest of
// that worker's build and of the tool's definition it announced (the one
// Tools and Definitions give). The Cache and Approval it answers are
// shared: read them, never change them. When no worker serves it but the tool is known (see
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
			if newer(a, newest) {
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
