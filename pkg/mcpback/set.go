package mcpback

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
}

// NewSet returns a Set of one Backend per config (checked by New).
func NewSet(cfgs []Config) (*Set, error) {
	s := &Set{}
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
// with why) and left out: the worker serves its other tools, and the
// server's Check reports it. Start fails only when reg refuses a tool (a
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
			b.cfg.Logger.Error("an MCP server did not start; serving the worker's other tools without its tools",
				"server", b.cfg.Name, "err", errs[i])
			continue
		}
		for _, t := range b.Tools() {
			if err := reg.Register(t); err != nil {
				_ = s.Stop(context.Background())
				return &RegisterError{Server: b.cfg.Name, Err: err}
			}
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

// Stop stops every server (Backend.Stop); it is idempotent.
func (s *Set) Stop(ctx context.Context) error {
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
	return errors.Join(errs...)
}

// Close stops the Set with no bound on the wait: an io.Closer.
func (s *Set) Close() error { return s.Stop(context.Background()) }
