package orchhost

import (
	"context"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
)

// openTasks opens the durable tasks' store on the started dispatcher.
func (h *Host) openTasks(ctx context.Context) error {
	tc := h.cfg.Tasks
	tc.Dispatcher, tc.Instance, tc.Logger = h.gate, h.d.Instance(), h.cfg.Logger
	s, err := tasks.Open(ctx, h.js, tc)
	if err != nil {
		return err
	}
	h.tasks.Store(s)
	return nil
}

// Tasks is the durable tasks' store (async HTTP calls, MCP tasks); nil
// before Start.
func (h *Host) Tasks() *tasks.Store { return h.tasks.Load() }

// hostTasks is the Host's store as the front doors take it: the one Start
// opened, tasks.ErrStopped before.
type hostTasks struct{ h *Host }

func (t hostTasks) store() (*tasks.Store, error) {
	if s := t.h.tasks.Load(); s != nil {
		return s, nil
	}
	return nil, tasks.ErrStopped
}

func (t hostTasks) Start(ctx context.Context, req tasks.Request) (tasks.Task, error) {
	s, err := t.store()
	if err != nil {
		return tasks.Task{}, err
	}
	return s.Start(ctx, req)
}

func (t hostTasks) Get(ctx context.Context, tenant, id string) (tasks.Task, error) {
	s, err := t.store()
	if err != nil {
		return tasks.Task{}, err
	}
	return s.Get(ctx, tenant, id)
}

func (t hostTasks) Wait(ctx context.Context, tenant, id string, d time.Duration) (tasks.Task, error) {
	s, err := t.store()
	if err != nil {
		return tasks.Task{}, err
	}
	return s.Wait(ctx, tenant, id, d)
}

func (t hostTasks) Cancel(ctx context.Context, tenant, id string) (tasks.Task, error) {
	s, err := t.store()
	if err != nil {
		return tasks.Task{}, err
	}
	return s.Cancel(ctx, tenant, id)
}
