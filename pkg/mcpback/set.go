package mcpback

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cenkalti/backoff/v4"

	"github.com/toolpool/toolpool/pkg/health"
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

// Set is the MCP servers of a worker process, started together.
type Set struct {
	backends []*Backend

	ctx    context.Context // ends with Stop: the retries of servers that failed at start
	cancel context.CancelCauseFunc
	mu     sync.Mutex // orders wg.Go of a retry before Stop's wg.Wait
	wg     sync.WaitGroup
}

// NewSet returns a Set of one Backend per config (checked by New).
func NewSet(cfgs []Config) (*Set, error) {
	s := &Set{}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	for _, cfg := range cfgs {
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
// *RegisterError), having stopped every server.
func (s *Set) Start(ctx context.Context, reg *tools.Registry) error {
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
				_ = s.Stop(context.Background())
				return &RegisterError{Server: b.cfg.Name, Err: err}
			}
		}
	}
	for i, b := range s.backends {
		if errs[i] != nil {
			b.cfg.Logger.Error("an MCP server did not start; serving the worker's other tools without its tools, and trying it again",
				"server", b.cfg.Name, "err", errs[i])
			s.mu.Lock()
			if s.ctx.Err() == nil {
				s.wg.Go(func() { s.retry(b) })
			}
			s.mu.Unlock()
		}
	}
	return nil
}

// retry starts b again with backoff until it is up or the Set stops, then
// tells b's OnChange of its tools.
func (s *Set) retry(b *Backend) {
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(b.cfg.RestartMin), backoff.WithMaxInterval(b.cfg.RestartMax),
		backoff.WithMaxElapsedTime(0))
	failures := 1
	err := backoff.Retry(func() error {
		err := b.Start(s.ctx) // bounded by Config.StartTimeout
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrStopped) || s.ctx.Err() != nil:
			return backoff.Permanent(err)
		}
		failures++
		if failures&(failures-1) == 0 { // 2, 4, 8, ...: a server down for long does not flood the log
			b.cfg.Logger.Warn("an MCP server still does not start; trying again", "server", b.cfg.Name, "failures", failures, "err", err)
		}
		return err
	}, backoff.WithContext(bo, s.ctx))
	if err != nil || s.ctx.Err() != nil {
		return
	}
	b.cfg.Logger.Info("an MCP server that did not start is up; serving its tools", "server", b.cfg.Name, "failures", failures)
	if b.cfg.OnChange != nil {
		b.cfg.OnChange(b.Tools())
	}
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
// server (Backend.Stop); it is idempotent.
func (s *Set) Stop(ctx context.Context) error {
	s.mu.Lock()
	s.cancel(ErrStopped)
	s.mu.Unlock()
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
	retried := make(chan struct{})
	go func() { s.wg.Wait(); close(retried) }()
	select {
	case <-retried:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// Close stops the Set with no bound on the wait: an io.Closer.
func (s *Set) Close() error { return s.Stop(context.Background()) }
