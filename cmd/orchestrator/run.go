package main

import (
	"context"
	"flag"
	"io"
	"log/slog"

	"github.com/toolpool/toolpool"
	"github.com/toolpool/toolpool/internal/opscmd"
)

// servePool is serve's pool as "orchestrator run" (opscmd.Run) starts it
// for itself: serve's flags with a one-off's defaults, and runServe.
type servePool struct{ f serveFlags }

var _ opscmd.Pool = (*servePool)(nil)

// Register adds serve's flags to fs, with a one-off's defaults.
func (p *servePool) Register(fs *flag.FlagSet) {
	p.f.register(fs)
	oneOff(fs) // a run is a one-off
}

// Check sets serve's mode-dependent defaults and validates its flags.
func (p *servePool) Check(given func(name string) bool) error { return p.f.check(given) }

// NATSURL is --nats-url (or NATS_URL).
func (p *servePool) NATSURL() string { return p.f.nats.URL() }

// Logger is the logger of --log-format and --log-level.
func (p *servePool) Logger(w io.Writer) (*slog.Logger, error) { return p.f.log.Logger(w) }

// TempDataDir gives an embedded server without --data-dir a temporary
// store.
func (p *servePool) TempDataDir(prefix string) (remove func(), err error) {
	return p.f.useTempDataDir(prefix)
}

// Serve runs the pool as serve does, with ready in place of waiting for
// a signal.
func (p *servePool) Serve(ctx context.Context, log *slog.Logger, ready func(context.Context, *toolpool.Orchestrator)) error {
	p.f.ready = ready
	return runServe(ctx, &p.f, log)
}
