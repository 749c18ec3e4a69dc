package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/infra/subject"
	"github.com/toolpool/toolpool/jetstream"
)

// Replicas. Every dispatcher with fair shares announces itself on core
// NATS (jetstream.SchedPresenceSubject) every Config.PresenceInterval and
// listens to the others' announcements. The live replicas — those heard
// from within PresenceMissed intervals, itself included — sorted by
// instance id give the scheduler its replica count and rank
// (sched.Scheduler.SetReplicas), so that each applies its share of a
// tool's per-key limits. A dispatcher that stops says so, and the others
// count it gone at their next interval. Announcements are plain messages:
// only orchestrators may publish on jetstream.SchedPresenceSubject (the
// accounts file allows no one else), and what one says is bounded all the same: an
// instance id must be a valid token, at most maxPeers others are counted,
// the scheduler's view changes once per interval whatever arrives, and a
// newcomer is answered at most once per interval. The same dispatcher
// answers requests on
// jetstream.SchedStatsSubject with its scheduler's snapshot (JSON), which
// `orchestrator status --by-key` sums over the replicas.

// presenceMsg is the body of an announcement.
type presenceMsg struct {
	Instance string `json:"instance"`
	// Leaving says the dispatcher stops.
	Leaving bool `json:"leaving,omitempty"`
}

// presence is a dispatcher's announcements and its view of the others,
// from Start until the dispatcher's life ends (run).
type presence struct {
	d        *Dispatcher
	interval time.Duration
	subs     []*nats.Subscription

	mu       sync.Mutex
	peers    map[string]time.Time // other instances → last heard; at most maxPeers
	answered time.Time            // when heard last announced this one to a newcomer
	updateMu sync.Mutex           // one update at a time, from the list to SetReplicas
}

// maxPeers bounds the other replicas a dispatcher counts: more than any
// fleet runs, few enough that invented instance ids cannot grow the map
// (or shrink every replica's share of a limit to nothing).
const maxPeers = 64

// startPresence subscribes to the announcements and the stats requests,
// announces the dispatcher and starts announcing it every interval, until
// the dispatcher's life ends. It is called by Start.
func (d *Dispatcher) startPresence() error {
	p := &presence{d: d, interval: d.cfg.PresenceInterval, peers: map[string]time.Time{}}
	for _, sub := range []struct {
		subject string
		h       nats.MsgHandler
	}{
		{jetstream.SchedPresenceSubject, p.heard},
		{jetstream.SchedStatsSubject, p.stats},
	} {
		s, err := d.nc.Subscribe(sub.subject, sub.h)
		if err != nil {
			p.unsubscribe()
			return err
		}
		p.subs = append(p.subs, s)
	}
	// The subscriptions reach the server before the first announcement
	// does, so a replica that answers it at once is heard.
	if err := d.nc.Flush(); err != nil {
		p.unsubscribe()
		return err
	}
	p.announce(false)
	d.Go(p.run)
	return nil
}

func (p *presence) unsubscribe() {
	for _, s := range p.subs {
		_ = s.Unsubscribe()
	}
}

// run announces every interval and forgets the replicas not heard from;
// when the dispatcher's life ends (Stop, or a Start that failed after
// startPresence) it unsubscribes and says the dispatcher leaves.
func (p *presence) run(life context.Context) {
	defer p.leave()
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		select {
		case <-life.Done():
			return
		case <-tick.C:
			p.announce(false)
			p.update()
		}
	}
}

// leave unsubscribes and says the dispatcher leaves.
func (p *presence) leave() {
	p.unsubscribe()
	p.announce(true)
}

func (p *presence) announce(leaving bool) {
	data, _ := json.Marshal(presenceMsg{Instance: p.d.cfg.Instance, Leaving: leaving})
	if err := p.d.nc.Publish(jetstream.SchedPresenceSubject, data); err != nil {
		p.d.log.Debug("announcing the scheduler's presence failed", slog.Any("error", err))
	}
}

// heard takes another replica's announcement; the scheduler's view
// follows at the next interval (update).
func (p *presence) heard(m *nats.Msg) {
	var msg presenceMsg
	if json.Unmarshal(m.Data, &msg) != nil || msg.Instance == p.d.cfg.Instance || !subject.ValidToken(msg.Instance) {
		return
	}
	now := time.Now()
	p.mu.Lock()
	_, known := p.peers[msg.Instance]
	switch {
	case msg.Leaving:
		delete(p.peers, msg.Instance)
	case known || len(p.peers) < maxPeers:
		p.peers[msg.Instance] = now
	}
	// A newcomer hears of this one now, not an interval later.
	answer := !known && !msg.Leaving && now.Sub(p.answered) >= p.interval
	if answer {
		p.answered = now
	}
	p.mu.Unlock()
	if answer {
		p.announce(false)
	}
}

// update forgets the replicas not heard from within PresenceMissed
// intervals and gives the scheduler the count and this one's rank.
func (p *presence) update() {
	p.updateMu.Lock()
	defer p.updateMu.Unlock()
	cutoff := time.Now().Add(-PresenceMissed * p.interval)
	p.mu.Lock()
	ids := []string{p.d.cfg.Instance}
	for id, at := range p.peers {
		if at.Before(cutoff) {
			delete(p.peers, id)
			continue
		}
		ids = append(ids, id)
	}
	p.mu.Unlock()
	slices.Sort(ids)
	rank := slices.Index(ids, p.d.cfg.Instance)
	if n, r := p.d.sched.Replicas(); n != len(ids) || r != rank {
		p.d.log.Debug("orchestrator replicas changed", slog.Int("replicas", len(ids)), slog.Int("rank", rank))
		p.d.sched.SetReplicas(len(ids), rank)
	}
}

// stats answers a stats request with the scheduler's snapshot.
func (p *presence) stats(m *nats.Msg) {
	if m.Reply == "" {
		return
	}
	data, err := json.Marshal(p.d.SchedSnapshot())
	if err != nil {
		return
	}
	_ = m.Respond(data)
}
