package tasks

import (
	"context"
	"errors"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// State is where a task is: StateWorking, then one of the final states.
// The values are MCP Tasks' status words.
type State string

// The states of a task.
const (
	// StateWorking: the calls run (or wait for their turn).
	StateWorking State = "working"
	// StateCompleted: every call has its result (a tool's error is a
	// result too): Task.Results.
	StateCompleted State = "completed"
	// StateFailed: the turn could not be handled as a whole (the pool did
	// not take the calls, or the answer is over the record limit):
	// Task.Error says why, in words for the client.
	StateFailed State = "failed"
	// StateCancelled: Cancel ended it; its calls were cancelled pool-wide.
	StateCancelled State = "cancelled"
)

// Final reports whether s is a final state (not working).
func (s State) Final() bool { return s != StateWorking }

// Request is what a task runs: one turn of calls, dispatched as the front
// door would dispatch them synchronously.
type Request struct {
	// Tenant is the API key's tenant ("" = none); only Get, Wait and
	// Cancel with the same tenant see the task.
	Tenant string `json:"tenant,omitempty"`
	// Session is the conversation, as Dispatch takes it.
	Session string `json:"session,omitempty"`
	// Calls are the calls to dispatch; Task.Results answers them in
	// this order. At least one.
	Calls []envelope.ToolUseBlock `json:"calls"`
	// Weight and Priority are the API key's (dispatch.WithWeight,
	// dispatch.WithPriority).
	Weight   int               `json:"weight,omitempty"`
	Priority dispatch.Priority `json:"priority,omitempty"`
	// KeyName is the API key's name, for budgets on one key
	// (policy.WithKeyName); NoCache asks for fresh results
	// (policy.WithNoCache).
	KeyName string `json:"key_name,omitempty"`
	NoCache bool   `json:"no_cache,omitempty"`
	// Traceparent is the W3C trace context the calls run under ("" = a
	// new one).
	Traceparent string `json:"traceparent,omitempty"`
	// Timeout bounds the turn, as a sync call's timeout does (0 =
	// Config.Timeout). An adopted task gets it afresh.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	// TTL is how long the record is kept after the task ended: 0 or more
	// than Config.Retention is Config.Retention.
	TTL time.Duration `json:"ttl_ns,omitempty"`
	// Front names the front door that created the task ("http", "mcp"):
	// who renders its answer. Opaque to the store.
	Front string `json:"front,omitempty"`
	// Payload is the front door's own data, kept as it is (e.g. the body
	// and shape to render the answer in). Opaque to the store.
	Payload []byte `json:"payload,omitempty"`
}

// Task is a task's record, as the bucket holds it.
type Task struct {
	// ID is unguessable (128 random bits, URL-safe base64, 22 characters).
	ID    string `json:"id"`
	State State  `json:"state"`
	// Created is when Start recorded it; Updated when it last changed
	// state (not the lease refreshes).
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// TTL is how long the record is kept after it ended.
	TTL time.Duration `json:"ttl_ns"`
	// PollInterval is a hint for clients: how often to poll while
	// working.
	PollInterval time.Duration `json:"poll_interval_ns"`
	// Results answer Request.Calls, in their order, when completed.
	Results []envelope.Result `json:"results,omitempty"`
	// Error is why the task failed (or was cancelled), in words for the
	// client.
	Error string `json:"error,omitempty"`
	// Request is what was asked: for rendering and adoption.
	Request Request `json:"request"`

	// Owner is the instance that created it, then the one that ended it;
	// Adoptions counts the replicas that took it over (set when it ends).
	// The live claim is the task's lease key, not the record.
	Owner     string `json:"owner,omitempty"`
	Adoptions int    `json:"adoptions,omitempty"`
	// CancelRequested is set by Cancel while the owner ends the calls.
	CancelRequested bool `json:"cancel_requested,omitempty"`
}

// Errors of the store.
var (
	// ErrNotFound: no such task for this tenant (another tenant's, an
	// expired one, or an id never issued).
	ErrNotFound = errors.New("tasks: no such task")
	// ErrStopped: the store is stopped (or not open); try another replica.
	ErrStopped = errors.New("tasks: the store is stopped")
	// ErrTooLarge: the request does not fit in a record
	// (Config.MaxRecordBytes).
	ErrTooLarge = errors.New("tasks: the request is over the record limit")
	// ErrInvalid: the request is not one a task can run (no calls, a bad
	// timeout).
	ErrInvalid = errors.New("tasks: invalid request")
)

// Dispatcher runs a turn: *dispatch.Dispatcher.
type Dispatcher interface {
	Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error)
}
