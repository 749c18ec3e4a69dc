package discovery

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// unheard is a liveness subject the server answered "no responders" for.
type unheard struct {
	since time.Time // the first such answer in a row
	gone  bool      // since GoneAfter or longer: the worker does not count
}

// probeLoop probes the liveness subjects every ProbeInterval until ctx
// ends.
func (c *Catalog) probeLoop(ctx context.Context) {
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
