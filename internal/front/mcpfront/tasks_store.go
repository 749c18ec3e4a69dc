package mcpfront

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// frontName is Request.Front of the tasks this server creates.
const frontName = "mcp"

// FleetStore is the fleet's durable task store (its JetStream bucket) as
// the front doors take it: *tasks.Store, or the orchestrator's view of
// the one it opens.
type FleetStore interface {
	Start(ctx context.Context, req tasks.Request) (tasks.Task, error)
	Get(ctx context.Context, tenant, id string) (tasks.Task, error)
	Wait(ctx context.Context, tenant, id string, d time.Duration) (tasks.Task, error)
	Cancel(ctx context.Context, tenant, id string) (tasks.Task, error)
}

// store is Config.Tasks as the protocol's code reads it: MCP tasks, each
// of one tools/call. Config.Tasks must be set.
func (s *Server) store() fleetTasks { return fleetTasks{s.cfg.Tasks} }

// fleetTasks is a FleetStore read as MCP's tasks: taskRequest and
// taskRecord.
type fleetTasks struct{ st FleetStore }

// Start records and starts the task of one call.
func (f fleetTasks) Start(ctx context.Context, req taskRequest) (taskRecord, error) {
	t, err := f.st.Start(ctx, tasks.Request{
		Tenant: req.Tenant, Session: req.Session, Calls: []envelope.ToolUseBlock{req.Call},
		Weight: req.Weight, Priority: req.Priority, TTL: req.TTL, KeyName: req.KeyName, NoCache: req.NoCache,
		Traceparent: cmp.Or(req.Traceparent, dispatch.NewTraceparent()), Front: frontName,
	})
	if err != nil {
		return taskRecord{}, fleetError(err, req.Call.Name)
	}
	return record(t), nil
}

// Get reads a task.
func (f fleetTasks) Get(ctx context.Context, tenant, id string) (taskRecord, error) {
	return mine(f.st.Get(ctx, tenant, id))
}

// Wait reads a task once it ended, or after d.
func (f fleetTasks) Wait(ctx context.Context, tenant, id string, d time.Duration) (taskRecord, error) {
	return mine(f.st.Wait(ctx, tenant, id, d))
}

// Cancel cancels a task of this front door.
func (f fleetTasks) Cancel(ctx context.Context, tenant, id string) (taskRecord, error) {
	if _, err := mine(f.st.Get(ctx, tenant, id)); err != nil {
		return taskRecord{}, err
	}
	return mine(f.st.Cancel(ctx, tenant, id))
}

// mine is a task read from the store as a taskRecord: an async call of
// the HTTP API (a turn of several calls, answered in an HTTP shape) is
// not a task of MCP's, and is not found here.
func mine(t tasks.Task, err error) (taskRecord, error) {
	if err != nil {
		return taskRecord{}, fleetError(err, "")
	}
	if t.Request.Front != frontName || len(t.Request.Calls) != 1 {
		return taskRecord{}, errTaskNotFound
	}
	return record(t), nil
}

// fleetError is the store's error as this package's: not found, a
// saturated pool (the call's isError answer), or a protocol error.
func fleetError(err error, tool string) error {
	var saturated *dispatch.SaturatedError
	var over *policy.ExhaustedError
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return errTaskNotFound
	case errors.As(err, &saturated):
		r := dispatch.SaturatedResult("", tool, saturated)
		return &immediate{toolResult(&r)}
	case errors.As(err, &over) && len(over.Results) == 1:
		return &immediate{toolResult(&over.Results[0])} // over budget: the budget's words
	case errors.Is(err, tasks.ErrTooLarge):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the call is over the task record's size limit: " + err.Error()}
	case errors.Is(err, tasks.ErrInvalid):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	case errors.Is(err, tasks.ErrStopped):
		return &immediate{errorResult(classify.ShuttingDownMessage(tool))}
	}
	return err
}

// record is a fleet task as a taskRecord. A call to a tool that does not
// exist (the catalog changed since the check) fails the task with the
// protocol error a call on the spot gets.
func record(t tasks.Task) taskRecord {
	r := taskRecord{ID: t.ID, Status: taskStatus(t.State), Message: t.Error, Created: t.Created, Updated: t.Updated,
		TTL: t.TTL, PollInterval: t.PollInterval}
	if t.State == tasks.StateCompleted && len(t.Results) > 0 {
		res := t.Results[0]
		if res.IsError && res.Code == classify.CodeUnknownTool {
			// Not the pool's text: it lists the catalog's tools, and the
			// caller's key may see fewer.
			r.Status = taskFailed
			r.Error = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("unknown tool %q: it left the catalog after the task was created; tools/list shows the tools there are", t.Request.Calls[0].Name)}
			return r
		}
		r.Result = &res
	}
	if t.State == tasks.StateFailed {
		// The turn could not be handled: a call on the spot answers that
		// with an isError result, not a protocol error.
		r.Status = taskCompleted
		r.Result = &envelope.Result{Tool: "", IsError: true, Content: envelope.Text(orText(t.Error, "the task failed"))}
	}
	return r
}
