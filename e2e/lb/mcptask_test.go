package lb_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// The MCP words of a client of revision 2026-07-28 using the Tasks
// extension (docs/mcp.md, "Tasks"): every request carries its revision
// and capabilities in _meta, declares the extension there, and names its
// method (and tool) in the Mcp-Method and Mcp-Name headers.
const (
	mcpRevision    = "2026-07-28"
	tasksExtension = "io.modelcontextprotocol/tasks"
)

var rpcSeq atomic.Int64

// rpcError is a JSON-RPC error.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// extTask is the extension's task as tools/call and tasks/get answer it.
type extTask struct {
	ResultType     string `json:"resultType"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage"`
	PollIntervalMs *int64 `json:"pollIntervalMs"`
	Result         *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Error *rpcError `json:"error"`
	// IsError and Content are those of a tools/call answered on the spot
	// (resultType "complete") instead of with a task.
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// mcpRequest sends one JSON-RPC request of revision 2026-07-28 with the
// Tasks extension declared to the proxy's /mcp and decodes its result
// into out. It returns the HTTP response (nil on a transport error), the
// JSON-RPC error if the server answered one, and any other error.
func (s *stack) mcpRequest(ctx context.Context, method, name string, params map[string]any, out any) (*http.Response, *rpcError, error) {
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": mcpRevision,
		"io.modelcontextprotocol/clientInfo":      map[string]any{"name": "toolpool-lb-e2e", "version": "1.0.0"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{
			"extensions": map[string]any{tasksExtension: map[string]any{}},
		},
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rpcSeq.Add(1), "method": method, "params": params})
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.lbURL+mcpPath, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpRevision)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, data, err := s.do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp, nil, fmt.Errorf("%s: %s: %s", method, resp.Status, data)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data = sseMessage(data)
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(data, &msg); err != nil {
		return resp, nil, fmt.Errorf("%s: %v: %s", method, err, data)
	}
	if msg.Error != nil {
		return resp, msg.Error, nil
	}
	if err := json.Unmarshal(msg.Result, out); err != nil {
		return resp, nil, fmt.Errorf("%s: %v: %s", method, err, msg.Result)
	}
	return resp, nil, nil
}

// sseMessage is the data of the last event of an SSE stream (the
// response; notifications come before it).
func sseMessage(stream []byte) []byte {
	var last, cur []byte
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("data:")):
			cur = append(cur, bytes.TrimSpace(line[5:])...)
		case len(line) == 0 && len(cur) > 0:
			last, cur = cur, nil
		}
	}
	if len(cur) > 0 {
		last = cur
	}
	return last
}

// mcpTaskCall runs one call as an MCP task through the proxy, as a client
// of the extension would: a task-augmented tools/call (sent again after
// a connection error or a 5xx), then tasks/get, paced by the task's
// pollIntervalMs (at most 1 s), until the task is no longer working.
func mcpTaskCall(ctx context.Context, s *stack, id string, accept func()) outcome {
	o := outcome{id: id, kind: "task", replicas: map[string]int{}}
	var task extTask
	for attempt := 0; task.TaskID == ""; attempt++ {
		if ctx.Err() != nil {
			o.err = "no task before the budget ended"
			return o
		}
		resp, rerr, err := s.mcpRequest(ctx, "tools/call", napTool,
			map[string]any{"name": napTool, "arguments": map[string]any{"marker": id}}, &task)
		switch {
		case resp == nil || transient(resp.StatusCode):
			o.retries++
			time.Sleep(backoff(attempt, resp))
			continue
		case err != nil:
			o.err = err.Error()
			return o
		case storeUnavailable(rerr):
			o.retries++
			time.Sleep(backoff(attempt, nil))
			continue
		case rerr != nil:
			o.err = fmt.Sprintf("tools/call: error %d: %s", rerr.Code, rerr.Message)
			return o
		}
		o.replicas[resp.Header.Get(replicaHeader)]++
		if saturated(task) {
			// The call was not run; the answer says to try again, as
			// the HTTP front door's 429 does.
			task = extTask{}
			o.retries++
			time.Sleep(backoff(attempt, nil))
			continue
		}
		if task.ResultType != "task" || task.TaskID == "" {
			o.err = fmt.Sprintf("tools/call answered %+v, want a task", task)
			return o
		}
	}
	o.ref = task.TaskID
	first := true
	for attempt := 0; ; attempt++ {
		if task.Status != "working" && task.ResultType == "complete" {
			break
		}
		pause := 500 * time.Millisecond
		if task.PollIntervalMs != nil {
			pause = min(max(time.Duration(*task.PollIntervalMs)*time.Millisecond, 100*time.Millisecond), time.Second)
		}
		time.Sleep(pause)
		if ctx.Err() != nil {
			o.err = "task still " + task.Status + " when the budget ended"
			return o
		}
		var got extTask
		resp, rerr, err := s.mcpRequest(ctx, "tasks/get", "", map[string]any{"taskId": o.ref}, &got)
		if first && resp != nil {
			// The first tasks/get answered: the call counts as accepted.
			accept()
			first = false
		}
		switch {
		case resp == nil || transient(resp.StatusCode):
			o.retries++
			time.Sleep(backoff(attempt, resp))
			continue
		case err != nil:
			o.err = err.Error()
			return o
		case storeUnavailable(rerr):
			o.retries++
			time.Sleep(backoff(attempt, nil))
			continue
		case rerr != nil:
			o.err = fmt.Sprintf("tasks/get %s: error %d: %s", o.ref, rerr.Code, rerr.Message)
			return o
		}
		o.replicas[resp.Header.Get(replicaHeader)]++
		task = got
	}
	return taskOutcome(o, task)
}

// storeUnavailable reports whether rerr is the MCP front door's answer
// when the task store (its NATS KV bucket) did not answer in time, as on
// a heavily loaded machine: a tools/call so answered recorded no task (its
// lease, written first, is removed again, and a record without a lease
// never runs) and a tasks/get changed nothing, so a client asks again, as
// the HTTP front door's 503 with Retry-After tells an async client to. A
// task that ran after all would show as a second execution of its marker.
func storeUnavailable(rerr *rpcError) bool {
	return rerr != nil && rerr.Code == -32603 && strings.HasPrefix(rerr.Message, "the task store is unavailable")
}

// saturated reports whether a tools/call was answered on the spot with
// the pool's saturation refusal (dispatch.SaturatedResult: the call was
// not run, try it again later), the answer a loaded machine gets when the
// tool's queue holds more work than the call's timeout.
func saturated(task extTask) bool {
	if task.ResultType != "complete" || !task.IsError {
		return false
	}
	for _, c := range task.Content {
		if strings.Contains(c.Text, "was not run: the tool pool is saturated") {
			return true
		}
	}
	return false
}

// taskOutcome completes o from an ended task.
func taskOutcome(o outcome, task extTask) outcome {
	switch {
	case task.Status != "completed":
		o.err = fmt.Sprintf("task %s ended %s: %s %+v", o.ref, task.Status, task.StatusMessage, task.Error)
	case task.Result == nil:
		o.err = fmt.Sprintf("task %s completed without a result", o.ref)
	default:
		o.results = 1
		o.isError = task.Result.IsError
		for _, c := range task.Result.Content {
			o.text += c.Text
		}
		o.done = time.Now()
	}
	return o
}

// mcpTaskAgain reads a completed task once more with tasks/get.
func mcpTaskAgain(ctx context.Context, s *stack, o outcome) outcome {
	again := outcome{id: o.id, kind: o.kind, ref: o.ref}
	var task extTask
	_, rerr, err := s.mcpRequest(ctx, "tasks/get", "", map[string]any{"taskId": o.ref}, &task)
	switch {
	case err != nil:
		again.err = err.Error()
	case rerr != nil:
		again.err = fmt.Sprintf("tasks/get %s: error %d: %s", o.ref, rerr.Code, rerr.Message)
	default:
		again = taskOutcome(again, task)
	}
	return again
}
