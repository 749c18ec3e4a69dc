package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/kvwatch"
	"github.com/toolpool/toolpool/internal/infra/startstop"
)

// ErrStopped is the cause of a stopped Store's life.
var ErrStopped = errors.New("budget: store stopped")

// Store is one orchestrator's view of the budgets: the definitions, kept
// in memory by a watch of the bucket, and the spending, fleet-wide in the
// counter stream. It implements policy.Budgets and is safe for concurrent
// use.
type Store struct {
	base startstop.Base
	cfg  Config
	log  *slog.Logger
	st   *store

	index atomic.Pointer[index] // nil until Start
}

// index is the definitions as the charges look them up: immutable, swapped
// whole on every change of the bucket.
type index struct {
	byTenant map[string][]*entry
	byKey    map[string][]*entry
	all      []*entry // by name
}

// entry is one budget in the index.
type entry struct {
	def Def
	tok string // token(def.Name)

	mu     sync.Mutex      // guards the rolling window's cache
	loaded bool            // closed holds the window's sub-periods
	final  int64           // the sub-periods up to this one are settled
	closed map[int64]int64 // a rolling window's closed sub-periods → spent
}

// New returns a Store of cfg; Start binds it.
func New(cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, log: cfg.Logger}, nil
}

// Start binds (creating them when they do not exist) the bucket and the
// counter stream, reads the definitions and starts the watch that keeps
// them up to date. Active and Charge work once it returned.
func (s *Store) Start(ctx context.Context) error {
	return s.base.Start(ctx, func(life context.Context) error {
		st, err := bind(ctx, s.cfg.JS, true, s.cfg.Replicas)
		if err != nil {
			return err
		}
		s.st = st
		w, err := st.kv.WatchAll(life)
		if err != nil {
			return fmt.Errorf("budget: watch %s: %w", BucketDefault, err)
		}
		defs := map[string]Def{}
		if err := s.initial(ctx, w, defs); err != nil {
			_ = w.Stop()
			return err
		}
		s.base.Go(func(life context.Context) { s.watch(life, w, defs) })
		return nil
	})
}

// Stop ends the watch. Charges still work on the definitions last seen.
func (s *Store) Stop(ctx context.Context) error {
	return s.base.Stop(ctx, ErrStopped, nil)
}

// initial reads the watch's initial values, up to its end marker, and
// publishes the index.
func (s *Store) initial(ctx context.Context, w js.KeyWatcher, defs map[string]Def) error {
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("budget: read %s: %w", BucketDefault, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("budget: read %s: the watch ended", BucketDefault)
			}
			if e == nil {
				s.publish(defs)
				return nil
			}
			s.apply(defs, e)
		}
	}
}

// watch applies the bucket's changes until life ends.
func (s *Store) watch(life context.Context, w js.KeyWatcher, defs map[string]Def) {
	kvwatch.Follow(life, w, func(e js.KeyValueEntry) {
		s.apply(defs, e)
		s.publish(defs)
	})
}

// apply applies one change of the bucket to defs.
func (s *Store) apply(defs map[string]Def, e js.KeyValueEntry) {
	if e.Operation() != js.KeyValuePut {
		delete(defs, e.Key())
		return
	}
	d, err := decodeDef(e.Value())
	if err != nil || token(d.Name) != e.Key() {
		s.log.Warn("budget: a definition that cannot be used is ignored", "key", e.Key(), "error", err)
		delete(defs, e.Key())
		return
	}
	defs[e.Key()] = d
}

// publish builds the index of defs and swaps it in; an unchanged budget
// keeps its entry (and its window's cache).
func (s *Store) publish(defs map[string]Def) {
	old := s.index.Load()
	prev := map[string]*entry{}
	if old != nil {
		for _, e := range old.all {
			prev[e.tok] = e
		}
	}
	ix := &index{byTenant: map[string][]*entry{}, byKey: map[string][]*entry{}}
	for tok, d := range defs {
		e := prev[tok]
		if e == nil || !sameDef(e.def, d) {
			e = &entry{def: d, tok: tok}
		}
		ix.all = append(ix.all, e)
		if d.Key != "" {
			ix.byKey[d.Key] = append(ix.byKey[d.Key], e)
		} else {
			ix.byTenant[d.Tenant] = append(ix.byTenant[d.Tenant], e)
		}
	}
	byName := func(a, b *entry) int { return cmpString(a.def.Name, b.def.Name) }
	slices.SortFunc(ix.all, byName)
	for _, es := range ix.byTenant {
		slices.SortFunc(es, byName)
	}
	for _, es := range ix.byKey {
		slices.SortFunc(es, byName)
	}
	s.index.Store(ix)
}

// sameDef reports whether a and b are the same definition.
func sameDef(a, b Def) bool {
	return a.Name == b.Name && a.Tenant == b.Tenant && a.Key == b.Key && slices.Equal(a.Tools, b.Tools) &&
		a.Period == b.Period && a.Window == b.Window && a.Limit == b.Limit && a.Cost == b.Cost &&
		a.Soft == b.Soft && a.ResetAt.Equal(b.ResetAt)
}

// Active reports whether a budget names the tenant or the key: without
// one, the gate does not charge. A map look-up: no I/O, no allocation.
func (s *Store) Active(tenant, key string) bool {
	ix := s.index.Load()
	if ix == nil {
		return false
	}
	if len(ix.byTenant[tenant]) > 0 {
		return true
	}
	return key != "" && len(ix.byKey[key]) > 0
}

// Defs returns the budgets this Store knows, by name.
func (s *Store) Defs() []Def {
	ix := s.index.Load()
	if ix == nil {
		return nil
	}
	out := make([]Def, 0, len(ix.all))
	for _, e := range ix.all {
		out = append(out, e.def)
	}
	return out
}

// List returns every budget this Store knows with its spending now, by
// name (the console).
func (s *Store) List(ctx context.Context) ([]Status, error) {
	if s.index.Load() == nil {
		return nil, errors.New("budget: store not started")
	}
	return s.st.statuses(ctx, s.Defs(), s.cfg.Now())
}

// settle is how long after its end a rolling window's sub-period is
// still read afresh: a charge of another replica (a slow publish, a clock
// a little behind) may still land in it.
const settle = 2 * time.Second
