package mcpback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/toolpool/toolpool/internal/infra/health"
	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/pkg/tools"
)

// RegisterError is a tool of a started server that the registry refused
// (a name another tool has): the server's configuration must change.
type RegisterError struct {
	// Server is the Backend's Config.Name.
	Server string
	// Err is the registry's error (a *tools.RegisterError).
	Err error
}

// Error names the server and the registry's reason.
func (e *RegisterError) Error() string { return "mcp server " + e.Server + ": " + e.Err.Error() }

// Unwrap returns the registry's error.
func (e *RegisterError) Unwrap() error { return e.Err }

// Set is the MCP servers of a worker process, started together. Its
// lifecycle is a startstop.Base: the retries of the servers that did not
// start run until its life ends.
type Set struct {
	startstop.Base
	backends []*Backend

	followMu sync.Mutex // serializes the changes handed on, in the order they came
	reg      *tools.Registry
	follow   Follower
	log      *slog.Logger
	served   map[string][]string     // server → the tools handed on last (or registered by Start)
	pending  map[string][]tools.Tool // server → its last change heard before Follow
	owner    map[string]string       // pool tool name → the server it came from
}

// Follower is what the tools of a Set's servers are handed to as they
// change: toolpool.Server.
type Follower interface {
	// Serve registers, serves and announces ts (or reannounces them).
	Serve(ctx context.Context, ts ...tools.Tool) error
	// Unserve withdraws the tools names and stops pulling their calls.
	Unserve(ctx context.Context, names ...string) error
}

// FollowTimeout bounds what Follower's Serve and Unserve do for one change
// of a server's tools (binding consumers, writing announcements).
const FollowTimeout = 30 * time.Second

// NewSet returns a Set of one Backend per config (checked by New).
func NewSet(cfgs []Config) (*Set, error) {
	s := &Set{served: map[string][]string{}, pending: map[string][]tools.Tool{}, owner: map[string]string{}}
	for _, cfg := range cfgs {
		next, name := cfg.OnChange, cfg.Name
		cfg.OnChange = func(ts []tools.Tool) {
			s.change(name, ts)
			if next != nil {
				next(ts)
			}
		}
		b, err := New(cfg)
		if err != nil {
			return nil, err
		}
		s.backends = append(s.backends, b)
	}
	return s, nil
}

// Backends are the Set's backends, in the order of the configs.
func (s *Set) Backends() []*Backend { return append([]*Backend(nil), s.backends...) }

// Start starts every server at once and registers the tools of those that
// started in reg. A server that does not start is logged (at error level,
// with why) and left out: the worker serves its other tools, the server's
// Check reports it, and the Set tries it again in the background with
// backoff (Config.RestartMin to RestartMax) until it is up or Stop; once
// up, its Config.OnChange hears of its tools (to register, serve and
// announce them). Start fails only when reg refuses a tool (a
// *RegisterError), having stopped every server. A Set starts once.
func (s *Set) Start(ctx context.Context, reg *tools.Registry) error {
	// Not refused for a ctx already over: the servers fail to start, and
	// are retried.
	err := s.Base.Start(context.WithoutCancel(ctx), func(life context.Context) error { return s.start(ctx, life, reg) })
	var re *RegisterError
	if errors.As(err, &re) {
		_ = s.Stop(context.Background())
	}
	return err
}

// start is Start's work; the retries run under life.
func (s *Set) start(ctx, life context.Context, reg *tools.Registry) error {
	s.followMu.Lock() // a change waits until what Start registered is known
	s.reg = reg
	errs := make([]error, len(s.backends))
	var wg sync.WaitGroup
	for i, b := range s.backends {
		wg.Go(func() { errs[i] = b.Start(ctx) })
	}
	wg.Wait()
	for i, b := range s.backends {
		if errs[i] != nil {
			continue
		}
		for _, t := range b.Tools() {
			if err := reg.Register(t); err != nil {
				s.followMu.Unlock()
				return &RegisterError{Server: b.cfg.Name, Err: err}
			}
			s.served[b.cfg.Name] = append(s.served[b.cfg.Name], t.Name)
			s.owner[t.Name] = b.cfg.Name
		}
	}
	s.followMu.Unlock()
	for i, b := range s.backends {
		if errs[i] != nil {
			b.cfg.Logger.Error("an MCP server did not start; serving the worker's other tools without its tools, and trying it again",
				"server", b.cfg.Name, "err", errs[i])
			s.Go(func(life context.Context) { s.retry(life, b) })
		}
	}
	return nil
}

// retry starts b again with backoff until it is up or life ends (the Set
// stops), then tells b's OnChange of its tools.
func (s *Set) retry(life context.Context, b *Backend) {
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(b.cfg.RestartMin), backoff.WithMaxInterval(b.cfg.RestartMax),
		backoff.WithMaxElapsedTime(0))
	failures := 1
	err := backoff.Retry(func() error {
		err := b.Start(life) // bounded by Config.StartTimeout
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrStopped) || life.Err() != nil:
			return backoff.Permanent(err)
		}
		failures++
		if failures&(failures-1) == 0 { // 2, 4, 8, ...: a server down for long does not flood the log
			b.cfg.Logger.Warn("an MCP server still does not start; trying again", "server", b.cfg.Name, "failures", failures, "err", err)
		}
		return err
	}, backoff.WithContext(bo, life))
	if err != nil || life.Err() != nil {
		return
	}
	b.cfg.Logger.Info("an MCP server that did not start is up; serving its tools", "server", b.cfg.Name, "failures", failures)
	b.tellTools()
}

// Follow makes f follow the tools of the Set's servers from now on: when a
// server's tool list changes (list_changed) or a server that did not
// start comes up, f serves its tools (registering and announcing the ones
// it adds, reannouncing the others) and withdraws the ones it removed.
// Changes heard before Follow are handed on at once. A tool whose name a
// tool of another origin has (in the registry given to Start) is not
// handed on: that is logged, as are f's errors, with log (default: the
// server's Logger).
func (s *Set) Follow(f Follower, log *slog.Logger) {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	s.follow, s.log = f, log
	for _, server := range slices.Sorted(maps.Keys(s.pending)) {
		s.hand(server, s.pending[server])
	}
	clear(s.pending)
}

// change hands on the tools server serves now, or keeps them until
// Follow.
func (s *Set) change(server string, ts []tools.Tool) {
	s.followMu.Lock()
	defer s.followMu.Unlock()
	if s.follow == nil || s.reg == nil {
		s.pending[server] = ts
		return
	}
	s.hand(server, ts)
}

// hand makes s.follow serve ts and withdraw what server served before and
// ts lacks; s.followMu is held.
func (s *Set) hand(server string, ts []tools.Tool) {
	log := s.log
	if log == nil {
		log = slog.Default()
		if b := s.backend(server); b != nil {
			log = b.cfg.Logger
		}
	}
	now := make([]string, 0, len(ts))
	mine := make([]tools.Tool, 0, len(ts))
	for _, t := range ts {
		owner, known := s.owner[t.Name]
		_, taken := s.reg.Lookup(t.Name)
		if known && owner != server || !known && taken {
			log.Error("an MCP server offers a tool whose name another tool has; not serving it (set or change the server's prefix)",
				"server", server, "tool", t.Name)
			continue
		}
		s.owner[t.Name] = server
		mine = append(mine, t)
		now = append(now, t.Name)
	}
	var removed []string
	for _, name := range s.served[server] {
		if !slices.Contains(now, name) {
			removed = append(removed, name)
		}
	}
	s.served[server] = now
	ctx, cancel := context.WithTimeout(s.Life(), FollowTimeout)
	defer cancel()
	if len(removed) > 0 {
		if err := s.follow.Unserve(ctx, removed...); err != nil {
			log.Warn("withdrawing the tools an MCP server removed failed", "server", server, "tools", removed, "err", err)
		}
	}
	if len(mine) > 0 {
		if err := s.follow.Serve(ctx, mine...); err != nil {
			log.Warn("serving an MCP server's tools failed", "server", server, "err", err)
		}
	}
}

// backend is the Set's backend of server, or nil.
func (s *Set) backend(server string) *Backend {
	for _, b := range s.backends {
		if b.cfg.Name == server {
			return b
		}
	}
	return nil
}

// Checks are the readiness checks of the Set's servers (Backend.Check).
func (s *Set) Checks() []health.Check {
	out := make([]health.Check, len(s.backends))
	for i, b := range s.backends {
		out[i] = b.Check()
	}
	return out
}

// Stop ends the retries of servers that did not start and stops every
// server (Backend.Stop), waiting for both until ctx ends; it is idempotent.
func (s *Set) Stop(ctx context.Context) error {
	retries := make(chan struct{})
	go func() { // ends the retries, and waits for them
		_ = s.Base.Stop(context.Background(), ErrStopped, nil)
		close(retries)
	}()
	errs := make([]error, len(s.backends))
	var wg sync.WaitGroup
	for i, b := range s.backends {
		wg.Go(func() {
			if err := b.Stop(ctx); err != nil {
				errs[i] = fmt.Errorf("mcp server %s: %w", b.cfg.Name, err)
			}
		})
	}
	wg.Wait()
	select {
	case <-retries:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// Close stops the Set with no bound on the wait: an io.Closer.
func (s *Set) Close() error { return s.Stop(context.Background()) }
