package discovery

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"
)

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
// model sees of them, their idempotency, cost, cache and approval rule),
// whichever workers announced them.
func sameTools(a, b []Announcement) bool {
	return slices.EqualFunc(a, b, func(x, y Announcement) bool {
		return x.Tool.Name == y.Tool.Name && x.Tool.Description == y.Tool.Description &&
			bytes.Equal(x.Tool.InputSchema, y.Tool.InputSchema) && x.Idempotent == y.Idempotent &&
			samePolicy(x, y)
	})
}
