package mcpfront

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// MCP Tasks (docs/mcp.md, "Tasks"): a tools/call may be answered with a
// task at once, its state and result kept in the fleet's task store
// (Config.Tasks: JetStream) that any replica reads, so that tasks/get, tasks/cancel (and
// tasks/result, 2025-11-25) are answered by whichever replica the request
// reaches. Two shapes are served:
//
//   - the Tasks extension io.modelcontextprotocol/tasks (stable with
//     revision 2026-07-28): a client that declares the extension in the
//     request's _meta capabilities gets a task (resultType "task") for
//     every tools/call; tasks/get inlines the result once completed;
//     tasks/update and tasks/cancel are acknowledged with an empty
//     result;
//   - tasks of revision 2025-11-25 (in the core protocol then): a
//     tools/call with params.task gets {"task": ...}; tasks/get answers
//     the task, tasks/result waits for the end and answers what the call
//     would have answered, tasks/cancel answers the cancelled task.
//
// The requests are read and answered here, before the go-sdk (which
// knows no tasks): on /mcp in post, on stdio in filterLines.

// TasksExtension is the identifier of the MCP Tasks extension.
const TasksExtension = "io.modelcontextprotocol/tasks"

// Protocol words of tasks.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaRelatedTask        = "io.modelcontextprotocol/related-task"
	// codeMissingCapability is the extension's "Missing Required Client
	// Capability".
	codeMissingCapability = -32021
	// revisionStateless is the first revision with the extension (and
	// per-request _meta).
	revisionStateless = "2026-07-28"
	// resultWait bounds one wait of tasks/result on the store; the wait
	// goes on until the task ends or the client goes away.
	resultWait = 30 * time.Second
)

// errTaskNotFound is what the store answers for a task it does not hold
// for the tenant: unknown, expired, another tenant's, or not MCP's.
var errTaskNotFound = errors.New("task not found")

// taskStatus is the status of a task, as MCP names it.
type taskStatus string

// The statuses of a task.
const (
	taskWorking   taskStatus = "working"
	taskCompleted taskStatus = "completed"
	taskFailed    taskStatus = "failed"
	taskCancelled taskStatus = "cancelled"
)

// taskRequest is one task-augmented tools/call, for the store to record
// and run.
type taskRequest struct {
	// Tenant owns the task: only a request of that tenant sees it.
	Tenant string
	// Session is the pool session of the call (the repeated-failure
	// advice's conversation).
	Session string
	// Call is the tool call.
	Call envelope.ToolUseBlock
	// Weight and Priority are the API key's (dispatch.WithWeight,
	// dispatch.WithPriority); zero without a key.
	Weight   int
	Priority dispatch.Priority
	// KeyName is the API key's name (budgets on one key); NoCache asks
	// for a fresh result (_meta "io.toolpool/cache": "no-cache").
	KeyName string
	NoCache bool
	// TTL is how long the client asked the task to be kept (2025-11-25's
	// params.task.ttl); 0: the store's default. The store may keep it
	// less.
	TTL time.Duration
	// Traceparent is the trace context the task's call runs under: the
	// creating request's span with tracing on; "" for a new trace.
	Traceparent string
}

// taskRecord is a task as this package reads it from the store
// (tasks_store.go).
type taskRecord struct {
	ID      string
	Status  taskStatus
	Message string // words on the status, may be empty
	Created time.Time
	Updated time.Time
	// TTL is how long from Created the task is kept; 0: unlimited.
	TTL time.Duration
	// PollInterval is the polling interval suggested to clients.
	PollInterval time.Duration
	// Result is the call's result once Completed.
	Result *envelope.Result
	// Error is the protocol error of a Failed task (e.g. the tool is
	// gone); nil: the store's words in Message.
	Error *jsonrpc.Error
}

// taskShape is the wire shape a task request is answered in.
type taskShape int

const (
	shapeNone   taskShape = iota // not a task request: the go-sdk serves it
	shapeExt                     // the extension (2026-07-28)
	shapeLegacy                  // 2025-11-25
)

// taskParams is what the task requests' params hold.
type taskParams struct {
	TaskID string `json:"taskId"`
	Meta   struct {
		Version      string `json:"io.modelcontextprotocol/protocolVersion"`
		Capabilities *struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"io.modelcontextprotocol/clientCapabilities"`
	} `json:"_meta"`
	Task json.RawMessage `json:"task"` // 2025-11-25: {"ttl": ms}
}

// taskIn is one request taskRoute took, with what it needs.
type taskIn struct {
	m       goodMessage
	p       taskParams
	shape   taskShape
	declare bool        // the request declares the extension
	key     *apikey.Key // the API key of the request, if any
	session string      // the pool session of a tools/call
	bad     bool        // the params could not be read
}

// isTaskMethod reports whether method is one of the tasks' methods.
func isTaskMethod(method string) bool {
	return strings.HasPrefix(method, "tasks/")
}

// taskRoute reports whether the lone request m is served here: a tasks/
// method, or a tools/call the client asked a task for. version is the
// request's MCP-Protocol-Version header, "" on stdio.
func (s *Server) taskRoute(m goodMessage, version string) (taskIn, bool) {
	if m.batch || m.id == nil {
		return taskIn{}, false
	}
	if m.method == "tools/call" {
		// Most calls ask no task: they are not read a second time.
		if s.cfg.Tasks == nil || !bytes.Contains(m.params, []byte(`"task"`)) && !bytes.Contains(m.params, []byte(TasksExtension)) {
			return taskIn{}, false
		}
	} else if !isTaskMethod(m.method) {
		return taskIn{}, false
	}
	in := taskIn{m: m}
	if len(m.params) > 0 && json.Unmarshal(m.params, &in.p) != nil {
		in.bad = true
		if isTaskMethod(m.method) {
			return in, true // answered with the params' error
		}
	}
	if c := in.p.Meta.Capabilities; c != nil {
		_, in.declare = c.Extensions[TasksExtension]
	}
	if v := in.p.Meta.Version; v != "" {
		version = v
	}
	in.shape = shapeLegacy
	if version >= revisionStateless {
		in.shape = shapeExt
	}
	if m.method != "tools/call" {
		return in, true
	}
	if s.cfg.Tasks == nil {
		return in, false
	}
	switch {
	case in.shape == shapeExt && in.declare:
		return in, true
	case in.shape == shapeLegacy && len(in.p.Task) > 0 && string(in.p.Task) != "null":
		return in, true
	}
	return in, false
}

// serveTask answers the request taskRoute took: the JSON-RPC response.
func (s *Server) serveTask(ctx context.Context, in taskIn) []byte {
	res, err := s.taskAnswer(ctx, in)
	if err != nil {
		return errorResponse(in.m.id, wireError(err))
	}
	body, merr := marshal(res)
	if merr != nil {
		return errorResponse(in.m.id, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"})
	}
	return resultResponse(in.m.id, body)
}

// taskAnswer is the result of a task request, or its protocol error.
func (s *Server) taskAnswer(ctx context.Context, in taskIn) (any, error) {
	if s.cfg.Tasks == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("method not found: %q (this server keeps no tasks)", in.m.method)}
	}
	if in.shape == shapeExt && !in.declare {
		return nil, missingCapability()
	}
	if in.m.method == "tools/call" {
		return s.createTask(ctx, in)
	}
	if in.shape == shapeExt && in.m.method != "tasks/get" && in.m.method != "tasks/update" && in.m.method != "tasks/cancel" ||
		in.shape == shapeLegacy && in.m.method != "tasks/get" && in.m.method != "tasks/result" && in.m.method != "tasks/cancel" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method not found: %q", in.m.method)}
	}
	if in.bad || in.p.TaskID == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: in.m.method + ` needs params {"taskId": "<the task's id>"}`}
	}
	tenant := tenantOf(in.key)
	var (
		t   taskRecord
		err error
	)
	switch in.m.method {
	case "tasks/cancel":
		t, err = s.cancelTask(ctx, in, tenant)
	case "tasks/result":
		t, err = s.waitTask(ctx, tenant, in.p.TaskID)
	default: // tasks/get, tasks/update
		t, err = s.store().Get(ctx, tenant, in.p.TaskID)
	}
	if err != nil {
		return nil, s.storeError(ctx, in.m.method, err)
	}
	switch {
	case in.shape == shapeExt && in.m.method == "tasks/get":
		return extDetailed(t), nil
	case in.shape == shapeExt: // tasks/update (no task asks for input), tasks/cancel
		return map[string]string{"resultType": "complete"}, nil
	case in.m.method == "tasks/result":
		return legacyResult(t)
	}
	return legacyTask(t), nil
}

// cancelTask cancels a task; 2025-11-25 refuses to cancel one that ended.
func (s *Server) cancelTask(ctx context.Context, in taskIn, tenant string) (taskRecord, error) {
	if in.shape == shapeLegacy {
		t, err := s.store().Get(ctx, tenant, in.p.TaskID)
		if err != nil {
			return t, err
		}
		if t.Status != taskWorking {
			return t, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
				Message: fmt.Sprintf("task %s is already %s: only a working task can be cancelled", t.ID, t.Status)}
		}
	}
	return s.store().Cancel(ctx, tenant, in.p.TaskID)
}

// waitTask waits for the task's end (tasks/result), until ctx is done.
func (s *Server) waitTask(ctx context.Context, tenant, id string) (taskRecord, error) {
	for {
		t, err := s.store().Wait(ctx, tenant, id, resultWait)
		if err != nil || t.Status != taskWorking {
			return t, err
		}
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
	}
}

// storeError is the protocol error of a store's error.
func (s *Server) storeError(ctx context.Context, method string, err error) error {
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je):
		return je
	case errors.Is(err, errTaskNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: "Failed to retrieve task: Task not found (unknown, expired after its ttl, or not this API key's tenant's)"}
	case ctx.Err() != nil:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: method + " ended before the task did (this server is stopping): ask again; any replica answers"}
	}
	s.cfg.Logger.WarnContext(ctx, "the task store failed", "method", method, "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: "the task store is unavailable (" + err.Error() + "): ask again in a few seconds; any replica answers"}
}

// createTask checks a task-augmented tools/call as run does, then starts
// its task.
func (s *Server) createTask(ctx context.Context, in taskIn) (out any, err error) {
	var p struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Task      struct {
			TTL *float64 `json:"ttl"`
		} `json:"task"`
		Meta json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(in.m.params, &p); err != nil || p.Name == nil {
		why := "the tool's name is missing"
		if err != nil {
			why = err.Error()
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: `tools/call needs params {"name": "<tool>", "arguments": {...}` + taskHint(in.shape) + `}: ` + why}
	}
	name, key := *p.Name, in.key
	input, kind := arguments(p.Arguments)
	switch {
	case key != nil && !key.Allows(name) || !s.knows(ctx, name):
		return nil, s.unknownTool(ctx, name, key)
	case kind != "":
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: classify.ArgumentsNotObjectMessage(name, kind)}
	case p.Task.TTL != nil && (*p.Task.TTL < 0 || *p.Task.TTL > float64(1<<53)):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params.task.ttl must be a number of milliseconds, at least 0"}
	}
	req := taskRequest{Tenant: tenantOf(key), Session: in.session,
		Call: envelope.ToolUseBlock{Type: "tool_use", ID: "mcp_" + rand.Text(), Name: name, Input: input}}
	if key != nil {
		req.Weight, req.Priority, req.KeyName = key.Weight, key.Priority, key.Name
	}
	req.NoCache = rawMetaNoCache(p.Meta)
	if p.Task.TTL != nil {
		req.TTL = time.Duration(*p.Task.TTL) * time.Millisecond
	}
	if s.cfg.Tracer.On() { // the task's call runs under this request's span: trace.go
		var span trace.Span
		ctx, span = s.startCallSpan(ctx, name, rawMetaTraceparent(p.Meta), req.Tenant)
		defer func() { endTaskSpan(span, err) }()
		req.Traceparent = tracing.FromContext(ctx)
	}
	t, err := s.store().Start(ctx, req)
	var now *immediate
	if errors.As(err, &now) {
		b, merr := marshal(now.res)
		if merr != nil || in.shape != shapeExt || len(b) < 3 {
			return now.res, merr
		}
		// The sync call's answer in 2026-07-28 says what it is.
		return json.RawMessage(append([]byte(`{"resultType":"complete",`), b[1:]...)), nil
	}
	if err != nil {
		return nil, s.storeError(ctx, "tools/call", err)
	}
	if in.shape == shapeExt {
		out := extTask(t)
		out.ResultType = "task"
		return out, nil
	}
	return struct {
		Task legacyTaskWire `json:"task"`
	}{legacyTask(t)}, nil
}

func taskHint(shape taskShape) string {
	if shape == shapeLegacy {
		return `, "task": {"ttl": <ms>}`
	}
	return ""
}

// knows reports whether the catalog lists the tool.
func (s *Server) knows(ctx context.Context, name string) bool {
	s.mu.Lock()
	_, ok := s.listed[name]
	s.mu.Unlock()
	if ok {
		return true
	}
	for _, t := range s.cfg.Tools(ctx) {
		if t.Name == name {
			return true
		}
	}
	return false
}

// tenantOf is the tenant of a request's key: "" without one.
func tenantOf(key *apikey.Key) string {
	if key == nil {
		return ""
	}
	return key.Tenant
}

// missingCapability is the extension's error to a client that did not
// declare it.
func missingCapability() *jsonrpc.Error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{
		"extensions": map[string]any{TasksExtension: map[string]any{}}}})
	return &jsonrpc.Error{Code: codeMissingCapability,
		Message: "Missing required client capability: declare the extension " + TasksExtension +
			" in _meta." + metaClientCapabilities + ".extensions", Data: data}
}

// resultResponse is a JSON-RPC response carrying result (JSON).
func resultResponse(id any, result []byte) []byte {
	idJSON, err := marshal(id)
	if err != nil {
		idJSON = []byte("null")
	}
	b := make([]byte, 0, 40+len(idJSON)+len(result))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, idJSON...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// immediate is a store's error that is the call's answer on the spot:
// no task was created (the pool is saturated, the replica is stopping),
// and the call answers as it would without a task.
type immediate struct{ res *mcp.CallToolResult }

// Error says that the call was answered at once.
func (e *immediate) Error() string { return "mcpfront: the call was answered without a task" }
