package cli

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/jetstream"
)

// ErrConnClosed is what Shutdown.Wait returns when the process's NATS
// connection closed for good: the process is a zombie, and the binary
// exits non-zero so that its supervisor starts a fresh one. It is
// toolpool.ErrConnClosed.
var ErrConnClosed = pooltype.ErrConnClosed

// ConnDrainTimeout bounds the drain of a process's NATS connection when it
// stops: what its components published last is flushed.
const ConnDrainTimeout = 5 * time.Second

// Shutdown is the one way the binaries' long-running commands (serve, mcp,
// run, worker) end. A command starts its components one after the other
// and gives each one's Stop to Defer as it starts: the embedded server,
// the NATS connection (Conn), the Servers, the Orchestrator, the HTTP
// server. Wait then runs until a signal ends ctx, the command's work is
// done, or the connection is closed for good, and stops them in the
// reverse order — the HTTP server, the Orchestrator, the Servers, the
// connection's drain, the embedded server — each with its drain. A
// start-up that fails calls Stop, which stops what had started.
//
//	sd := &cli.Shutdown{Role: "worker", Logger: log}
//	defer sd.Stop()   // a failed start-up
//	sd.Conn(nc)
//	…
//	sd.Defer("workers", drain, srv.Stop, "drain timeout passed; …")
//	return sd.Wait(ctx, nil)
type Shutdown struct {
	// Role names the process in the log: "orchestrator", "worker".
	Role string
	// Logger receives the shutdown's log. Default slog.Default().
	Logger *slog.Logger

	conn  *nats.Conn
	steps []step // in the order they were deferred
}

// step is one component's stop.
type step struct {
	name  string
	drain time.Duration
	stop  func(context.Context) error
	warn  string
}

// NoDrain is the drain of a component that has nothing to drain, or
// bounds its stop itself: its stop gets a ctx without a deadline.
const NoDrain time.Duration = -1

// Defer adds a component's stop: Stop (and Wait) calls it before those
// deferred earlier, with a ctx that ends after drain (at once for 0; none
// for NoDrain). A stop that returns an error is logged with warn, when
// given.
func (s *Shutdown) Defer(name string, drain time.Duration, stop func(context.Context) error, warn string) {
	s.steps = append(s.steps, step{name: name, drain: drain, stop: stop, warn: warn})
}

// Conn makes Wait end when nc closes for good, and defers nc's drain (up
// to ConnDrainTimeout): defer it after the embedded server it connects
// to, and before the components that publish on it.
func (s *Shutdown) Conn(nc *nats.Conn) {
	s.conn = nc
	s.Defer("nats", NoDrain, func(context.Context) error { return DrainConn(nc, ConnDrainTimeout) }, "closing the NATS connection")
}

// Wait runs until ctx ends (a signal), run returns (when run is not nil),
// or the connection given to Conn closes for good; then it stops every
// component deferred, in the reverse order. It returns ErrConnClosed in
// the last case, nil otherwise. run's ctx ends in all three cases.
func (s *Shutdown) Wait(ctx context.Context, run func(ctx context.Context)) error {
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	if s.conn != nil {
		closed := jetstream.Closed(s.conn)
		go func() {
			select {
			case <-closed:
				stopRun(ErrConnClosed)
			case <-runCtx.Done():
			}
		}()
	}
	if run != nil {
		run(runCtx)
	} else {
		<-runCtx.Done()
	}
	lost := errors.Is(context.Cause(runCtx), ErrConnClosed)
	if lost {
		s.logger().Error("the NATS connection is closed for good; stopping so that the "+s.Role+" is restarted", "err", s.conn.LastError())
	}
	s.logger().Info("shutting down")
	s.Stop()
	if lost {
		return ErrConnClosed
	}
	return nil
}

// Stop stops the components deferred and not stopped yet, the last
// deferred first, each bounded by its drain. It is idempotent: a command
// defers it for a start-up that fails.
func (s *Shutdown) Stop() {
	for len(s.steps) > 0 {
		st := s.steps[len(s.steps)-1]
		s.steps = s.steps[:len(s.steps)-1]
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if st.drain >= 0 {
			ctx, cancel = context.WithTimeout(ctx, st.drain)
		}
		err := st.stop(ctx)
		cancel()
		if err != nil && st.warn != "" {
			s.logger().Warn(st.warn, "component", st.name, "timeout", st.drain, "err", err)
		}
	}
}

func (s *Shutdown) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}
