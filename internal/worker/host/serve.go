package host

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/toolpool/toolpool/pkg/tools"
)

// servedNames are the tools the workers serve: Config.Worker.Tools,
// or the registry's, less those withheld; h.mu is held.
func (h *Host) servedNames() []string {
	names := h.cfg.Worker.Tools
	if len(names) == 0 {
		names = h.cfg.Registry.Names()
	}
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return h.withheld[n] })
}

// noteServed records servedNames for servedNow; h.mu is held (or h is
// not shared yet).
func (h *Host) noteServed() {
	names := h.servedNames()
	h.served.Store(&names)
}

// servedNow are the tools served (or to be served by Start) as of the
// last change.
func (h *Host) servedNow() []string { return *h.served.Load() }

// checkedNow are the tools whose consumers readiness looks up: servedNow
// once the workers have started, none before (the "worker" check says
// "starting" then). The check's result is kept for a refresh interval
// (health.Background) unless what it checks changes: so a probe before
// Start made the consumers ("consumer not found") is not answered again
// for up to 5 s after they exist.
func (h *Host) checkedNow() []string {
	if !h.ready.Load() {
		return nil
	}
	return h.servedNow()
}

// Serve makes every worker of the Host serve the tools ts from now on
// (an MCP server of the catalog added them, or came up late), and
// announces them: a tool not in the registry is registered first; one the
// registry holds already (served before, withdrawn by Unserve) is served
// again as registered, and announced with ts's description and schema.
// Tools served already are reannounced. Before Start, Serve only registers
// them: Start serves them. It returns the first error (a tool the registry
// refuses, a consumer that cannot be bound); the tools before it are
// served.
func (h *Host) Serve(ctx context.Context, ts ...tools.Tool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errors.New("host: stopped")
	}
	rts, err := scratchRegistered(ts)
	if err != nil {
		return fmt.Errorf("host: serve: %w", err)
	}
	names := make([]string, 0, len(ts))
	for _, t := range ts {
		if _, ok := h.cfg.Registry.Lookup(t.Name); !ok {
			if err := h.cfg.Registry.Register(t); err != nil {
				return fmt.Errorf("host: serve: %w", err)
			}
		}
		delete(h.withheld, t.Name)
		names = append(names, t.Name)
	}
	if len(h.cfg.Worker.Tools) > 0 {
		h.cfg.Worker.Tools = append(slices.DeleteFunc(h.cfg.Worker.Tools, func(n string) bool { return slices.Contains(names, n) }), names...)
	}
	h.metrics.AddTools(names...)
	defer h.noteServed() // also after an error: the tools before it are served
	for _, w := range h.workers {
		if err := w.Serve(ctx, names...); err != nil {
			return fmt.Errorf("host: serve: %w", err)
		}
	}
	var errs []error
	for _, a := range h.announcers {
		errs = append(errs, a.Add(ctx, rts...))
	}
	if len(h.workers) > 0 {
		h.cfg.Logger.Info("serving tools", "tools", names)
	}
	return errors.Join(errs...)
}

// Unserve withdraws the announcements of the tools names, then makes every
// worker stop pulling their calls (an MCP server no longer offers them):
// calls the workers pulled but did not start go back to JetStream, to a
// worker that still serves the tool, or wait for one as calls of a tool
// no worker serves do; calls running finish. The registry keeps the tools
// (Serve serves them again). Tools not served are ignored. Before Start,
// the tools are left out of what Start serves.
func (h *Host) Unserve(ctx context.Context, names ...string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.withheld == nil {
		h.withheld = map[string]bool{}
	}
	for _, n := range names {
		h.withheld[n] = true
	}
	h.noteServed()
	var errs []error
	for _, a := range h.announcers {
		errs = append(errs, a.Withdraw(ctx, names...))
	}
	for _, w := range h.workers {
		errs = append(errs, w.Unserve(ctx, names...))
	}
	if len(h.workers) > 0 {
		h.cfg.Logger.Info("no longer serving tools", "tools", names)
	}
	return errors.Join(errs...)
}

// scratchRegistered are ts as registered tools of a registry of their own:
// what their announcements say.
func scratchRegistered(ts []tools.Tool) ([]*tools.Registered, error) {
	scratch := tools.NewRegistry()
	rts := make([]*tools.Registered, 0, len(ts))
	for _, t := range ts {
		if err := scratch.Register(t); err != nil {
			return nil, err
		}
		rt, _ := scratch.Lookup(t.Name)
		rts = append(rts, rt)
	}
	return rts, nil
}
