package mcpfront

import (
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/pkg/classify"
)

// The wire shapes of tasks: the extension's (2026-07-28: ttlMs,
// pollIntervalMs, resultType, the result inlined in tasks/get) and
// revision 2025-11-25's (ttl, pollInterval, the result from
// tasks/result).

// extTaskWire is the extension's Task, with the fields of its detailed
// shapes (DetailedTask) and the result discriminator.
type extTaskWire struct {
	ResultType     string          `json:"resultType,omitempty"`
	TaskID         string          `json:"taskId"`
	Status         TaskStatus      `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs *int64          `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *jsonrpc.Error  `json:"error,omitempty"`
}

// legacyTaskWire is revision 2025-11-25's Task.
type legacyTaskWire struct {
	TaskID        string     `json:"taskId"`
	Status        TaskStatus `json:"status"`
	StatusMessage string     `json:"statusMessage,omitempty"`
	CreatedAt     string     `json:"createdAt"`
	LastUpdatedAt string     `json:"lastUpdatedAt"`
	TTL           *int64     `json:"ttl"`
	PollInterval  *int64     `json:"pollInterval,omitempty"`
}

// millis is d in integer milliseconds; nil (JSON null, or left out) for
// 0.
func millis(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}

// stamp is t as ISO 8601 (RFC 3339, UTC, milliseconds).
func stamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// extTask is t as the extension's Task (CreateTaskResult's fields).
func extTask(t TaskRecord) extTaskWire {
	return extTaskWire{TaskID: t.ID, Status: t.Status, StatusMessage: t.Message,
		CreatedAt: stamp(t.Created), LastUpdatedAt: stamp(t.Updated),
		TTLMs: millis(t.TTL), PollIntervalMs: millis(t.PollInterval)}
}

// extDetailed is tasks/get's answer in the extension: the task, with its
// result once completed and its error once failed.
func extDetailed(t TaskRecord) extTaskWire {
	out := extTask(t)
	out.ResultType = "complete"
	switch res, err := taskOutcome(t); {
	case t.Status == TaskCompleted:
		out.Result, _ = marshal(res)
	case t.Status == TaskFailed:
		out.Error = wireError(err)
	}
	return out
}

// legacyTask is t as 2025-11-25's Task.
func legacyTask(t TaskRecord) legacyTaskWire {
	return legacyTaskWire{TaskID: t.ID, Status: t.Status, StatusMessage: t.Message,
		CreatedAt: stamp(t.Created), LastUpdatedAt: stamp(t.Updated),
		TTL: millis(t.TTL), PollInterval: millis(t.PollInterval)}
}

// legacyResult is tasks/result's answer to an ended task: what the
// tools/call would have answered, with the related-task _meta; the
// protocol error of a failed one; an error for a cancelled one (the
// call's answer is nobody's then).
func legacyResult(t TaskRecord) (any, error) {
	switch t.Status {
	case TaskCompleted:
		res, _ := taskOutcome(t)
		if res.Meta == nil {
			res.Meta = mcp.Meta{}
		}
		res.Meta[metaRelatedTask] = map[string]string{"taskId": t.ID}
		return res, nil
	case TaskCancelled:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "task " + t.ID + " was cancelled: it has no result"}
	}
	_, err := taskOutcome(t)
	return nil, err
}

// taskOutcome is what the tools/call of an ended task answers: the
// CallToolResult of a completed task (isError for a tool's error, as the
// call on the spot), or the protocol error of a failed one.
func taskOutcome(t TaskRecord) (*mcp.CallToolResult, error) {
	switch {
	case t.Status == TaskFailed && t.Error != nil:
		return nil, t.Error
	case t.Status == TaskFailed:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: orText(t.Message, "the task failed")}
	case t.Result == nil:
		return errorResult(orText(t.Message, classify.NotPreparedMessage("the tool"))), nil
	}
	return toolResult(t.Result), nil
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
