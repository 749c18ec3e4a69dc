package mcpfront

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// memTasks is a FleetStore in memory, for the protocol's tests (the
// fleet's store, on JetStream, is tested with two orchestrators in
// tasks_fleet_test.go): it runs each turn through d.
type memTasks struct {
	d  Dispatcher
	mu sync.Mutex
	m  map[string]*memTask
	n  int
}

type memTask struct {
	rec    tasks.Task
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *memTasks) Start(_ context.Context, req tasks.Request) (tasks.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*memTask{}
	}
	s.n++
	now := time.Now()
	ctx, cancel := context.WithCancel(dispatch.WithTenant(context.Background(), req.Tenant))
	t := &memTask{cancel: cancel, done: make(chan struct{}), rec: tasks.Task{ID: fmt.Sprintf("task-%d", s.n),
		State: tasks.StateWorking, Created: now, Updated: now, TTL: time.Hour, PollInterval: time.Second, Request: req}}
	s.m[t.rec.ID] = t
	go func() {
		defer close(t.done)
		res, err := s.d.Dispatch(ctx, req.Session, req.Calls)
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case t.rec.State != tasks.StateWorking:
		case err != nil:
			t.rec.State, t.rec.Error = tasks.StateFailed, err.Error()
		default:
			t.rec.State, t.rec.Results = tasks.StateCompleted, res
		}
		t.rec.Updated = time.Now()
	}()
	return t.rec, nil
}

func (s *memTasks) find(tenant, id string) (*memTask, error) {
	t, ok := s.m[id]
	if !ok || t.rec.Request.Tenant != tenant {
		return nil, tasks.ErrNotFound
	}
	return t, nil
}

func (s *memTasks) Get(_ context.Context, tenant, id string) (tasks.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.find(tenant, id)
	if err != nil {
		return tasks.Task{}, err
	}
	return t.rec, nil
}

func (s *memTasks) Wait(ctx context.Context, tenant, id string, d time.Duration) (tasks.Task, error) {
	s.mu.Lock()
	t, err := s.find(tenant, id)
	s.mu.Unlock()
	if err != nil {
		return tasks.Task{}, err
	}
	select {
	case <-t.done:
	case <-time.After(d):
	case <-ctx.Done():
	}
	return s.Get(ctx, tenant, id)
}

func (s *memTasks) Cancel(_ context.Context, tenant, id string) (tasks.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.find(tenant, id)
	if err != nil {
		return tasks.Task{}, err
	}
	if t.rec.State == tasks.StateWorking {
		t.rec.State, t.rec.Updated = tasks.StateCancelled, time.Now()
		t.cancel()
	}
	return t.rec, nil
}

// gated is a Dispatcher whose calls wait for release (or their cancel).
type gated struct {
	release chan struct{}
	mu      sync.Mutex
	runs    int
	ended   []error
}

func (d *gated) Dispatch(ctx context.Context, _ string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	d.mu.Lock()
	d.runs++
	d.mu.Unlock()
	select {
	case <-d.release:
		return []envelope.Result{{CallID: calls[0].ID, Tool: calls[0].Name, Content: envelope.Text("ran " + calls[0].Name + " " + string(calls[0].Input))}}, nil
	case <-ctx.Done():
		d.mu.Lock()
		d.ended = append(d.ended, ctx.Err())
		d.mu.Unlock()
		return nil, ctx.Err()
	}
}

// stdioClient speaks raw JSON-RPC lines to a stdio server.
type stdioClient struct {
	t   *testing.T
	in  io.Writer
	out *bufio.Reader
	id  int
}

func newStdioTasks(t *testing.T, d Dispatcher, store FleetStore) *stdioClient {
	t.Helper()
	return newStdioClient(t, Config{Dispatcher: d, Tools: staticTools, Tasks: store})
}

// newStdioClient serves a Server of cfg on stdio, to a raw client.
func newStdioClient(t *testing.T, cfg Config) *stdioClient {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
	t.Cleanup(func() {
		_ = inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeStdio: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("ServeStdio did not end with its input")
		}
		_ = s.Stop(context.Background())
	})
	return &stdioClient{t: t, in: inW, out: bufio.NewReader(outR)}
}

// rpcAnswer is a JSON-RPC response as a test reads it.
type rpcAnswer struct {
	ID     any             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// call sends a request and reads lines until its answer.
func (c *stdioClient) call(method string, params string) rpcAnswer {
	c.t.Helper()
	c.id++
	if _, err := fmt.Fprintf(c.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", c.id, method, params); err != nil {
		c.t.Fatal(err)
	}
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			c.t.Fatalf("%s: reading the answer: %v", method, err)
		}
		var a rpcAnswer
		if json.Unmarshal(line, &a) != nil {
			continue
		}
		if f, ok := a.ID.(float64); ok && int(f) == c.id {
			return a
		}
	}
}

// extMeta is the _meta of a 2026-07-28 request that declares the Tasks
// extension (declare) or not.
func extMeta(declare bool) string {
	ext := `{}`
	if declare {
		ext = `{"io.modelcontextprotocol/tasks":{}}`
	}
	return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":` + ext + `}}`
}

// extTaskAnswer is the extension's Task as a test reads it.
type extTaskAnswer struct {
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs *int64          `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result"`
	Error          json.RawMessage `json:"error"`
}

func decode[T any](t *testing.T, a rpcAnswer) T {
	t.Helper()
	var v T
	if a.Error != nil {
		t.Fatalf("error %d: %s", a.Error.Code, a.Error.Message)
	}
	if err := json.Unmarshal(a.Result, &v); err != nil {
		t.Fatalf("result %s: %v", a.Result, err)
	}
	return v
}

// TestStdioTasksExtension: on stdio, a 2026-07-28 client that declares the
// extension finds it in server/discover, gets a task for its tools/call
// at once (the call still running), and tasks/get answers working, then
// completed with the CallToolResult inlined; an unknown task is -32602;
// tasks/get without the declaration is -32021; a call without it is
// answered on the spot.
func TestStdioTasksExtension(t *testing.T) {
	d := &gated{release: make(chan struct{})}
	c := newStdioTasks(t, d, &memTasks{d: d})

	disc := decode[struct {
		Capabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"capabilities"`
	}](t, c.call("server/discover", `{`+extMeta(true)+`}`))
	if _, ok := disc.Capabilities.Extensions[TasksExtension]; !ok {
		t.Fatalf("server/discover's capabilities do not list %s: %+v", TasksExtension, disc.Capabilities)
	}

	created := decode[extTaskAnswer](t, c.call("tools/call", `{"name":"slow","arguments":{"n":1},`+extMeta(true)+`}`))
	if created.ResultType != "task" || created.TaskID == "" || created.Status != "working" || created.TTLMs == nil || created.PollIntervalMs == nil {
		t.Fatalf("tools/call answered %+v, want a working task (resultType task, ttlMs, pollIntervalMs)", created)
	}
	if _, err := time.Parse(time.RFC3339, created.CreatedAt); err != nil {
		t.Errorf("createdAt %q: %v", created.CreatedAt, err)
	}
	get := `{"taskId":"` + created.TaskID + `",` + extMeta(true) + `}`
	if got := decode[extTaskAnswer](t, c.call("tasks/get", get)); got.Status != "working" || got.ResultType != "complete" || got.Result != nil {
		t.Fatalf("tasks/get while the call runs: %+v", got)
	}
	close(d.release)
	var got extTaskAnswer
	for deadline := time.Now().Add(10 * time.Second); ; {
		got = decode[extTaskAnswer](t, c.call("tasks/get", get))
		if got.Status != "working" || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got.Status != "completed" || !strings.Contains(string(got.Result), `ran slow {\"n\":1}`) || strings.Contains(string(got.Result), `"isError":true`) {
		t.Fatalf("tasks/get once done: %+v (result %s)", got, got.Result)
	}

	if a := c.call("tasks/get", `{"taskId":"nope",`+extMeta(true)+`}`); a.Error == nil || a.Error.Code != -32602 {
		t.Errorf("tasks/get of an unknown task: %+v, want -32602", a)
	}
	a := c.call("tasks/get", `{"taskId":"`+created.TaskID+`",`+extMeta(false)+`}`)
	if a.Error == nil || a.Error.Code != -32021 || !strings.Contains(string(a.Error.Data), TasksExtension) {
		t.Errorf("tasks/get without the extension declared: %+v, want -32021 naming it", a)
	}
	if a := c.call("tasks/cancel", `{"taskId":"`+created.TaskID+`",`+extMeta(true)+`}`); a.Error != nil || !strings.Contains(string(a.Result), `"resultType":"complete"`) {
		t.Errorf("tasks/cancel of an ended task: %+v %s, want an empty acknowledgement", a.Error, a.Result)
	}
	if a := c.call("tasks/update", `{"taskId":"`+created.TaskID+`","inputResponses":{},`+extMeta(true)+`}`); a.Error != nil {
		t.Errorf("tasks/update: %+v, want an acknowledgement", a.Error)
	}
	if a := c.call("tasks/get", `{`+extMeta(true)+`}`); a.Error == nil || a.Error.Code != -32602 {
		t.Errorf("tasks/get without a taskId: %+v, want -32602", a)
	}
	if a := c.call("tools/call", `{"name":"nope",`+extMeta(true)+`}`); a.Error == nil || a.Error.Code != -32602 {
		t.Errorf("a task for an unknown tool: %+v, want -32602 at once", a)
	}
	sync := c.call("tools/call", `{"name":"slow",`+extMeta(false)+`}`)
	if sync.Error != nil || strings.Contains(string(sync.Result), `"taskId"`) || !strings.Contains(string(sync.Result), "ran slow") {
		t.Errorf("a call of a client without the extension: %s %+v, want the result on the spot", sync.Result, sync.Error)
	}
}

// TestStdioTasksLegacy: a 2025-11-25 session's initialize declares
// capabilities.tasks and its tools/list execution.taskSupport; its
// tools/call with params.task
// gets {"task": ...} at once; tasks/result waits for the end and answers
// the CallToolResult with the related-task _meta; tasks/cancel of a
// working task answers it cancelled and cancels the call; of an ended
// one, -32602.
func TestStdioTasksLegacy(t *testing.T) {
	d := &gated{release: make(chan struct{})}
	c := newStdioTasks(t, d, &memTasks{d: d})
	type legacy struct {
		Task struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
			TTL    *int64 `json:"ttl"`
		} `json:"task"`
	}
	init := decode[struct {
		Capabilities struct {
			Tasks json.RawMessage `json:"tasks"`
		} `json:"capabilities"`
	}](t, c.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`))
	if string(init.Capabilities.Tasks) != string(legacyTaskCapability) {
		t.Errorf("initialize's capabilities.tasks = %s, want %s", init.Capabilities.Tasks, legacyTaskCapability)
	}
	if _, err := io.WriteString(c.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	list := decode[struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}](t, c.call("tools/list", `{}`))
	if len(list.Tools) != 1 || list.Tools[0].Execution.TaskSupport != "optional" {
		t.Errorf("tools/list of a 2025-11-25 session: %+v, want execution.taskSupport optional", list.Tools)
	}
	first := decode[legacy](t, c.call("tools/call", `{"name":"slow","arguments":{},"task":{"ttl":60000}}`))
	second := decode[legacy](t, c.call("tools/call", `{"name":"slow","task":{}}`))
	if first.Task.TaskID == "" || first.Task.Status != "working" || first.Task.TTL == nil {
		t.Fatalf("tools/call with a task: %+v", first)
	}
	cancelled := decode[struct {
		Status string `json:"status"`
	}](t, c.call("tasks/cancel", `{"taskId":"`+second.Task.TaskID+`"}`))
	if cancelled.Status != "cancelled" {
		t.Errorf("tasks/cancel answered %q, want cancelled", cancelled.Status)
	}
	// tasks/result blocks: the release comes while it waits.
	go func() { time.Sleep(50 * time.Millisecond); close(d.release) }()
	a := c.call("tasks/result", `{"taskId":"`+first.Task.TaskID+`"}`)
	if a.Error != nil || !strings.Contains(string(a.Result), "ran slow") || !strings.Contains(string(a.Result), metaRelatedTask) {
		t.Fatalf("tasks/result: %s %+v", a.Result, a.Error)
	}
	if a := c.call("tasks/cancel", `{"taskId":"`+first.Task.TaskID+`"}`); a.Error == nil || a.Error.Code != -32602 {
		t.Errorf("tasks/cancel of a completed task: %+v, want -32602", a)
	}
	if a := c.call("tasks/get", `{"taskId":"nope"}`); a.Error == nil || a.Error.Code != -32602 {
		t.Errorf("tasks/get of an unknown task: %+v, want -32602", a)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ended) != 1 {
		t.Errorf("the cancelled task's call ended %v, want cancelled once", d.ended)
	}
}

// TestStdioNoTaskStore: without a store, tasks/ methods are "method not
// found", the capabilities name no tasks, and a params.task is ignored
// (the call answered on the spot).
func TestStdioNoTaskStore(t *testing.T) {
	c := newStdioTasks(t, &scripted{}, nil)
	if a := c.call("tasks/get", `{"taskId":"x"}`); a.Error == nil || a.Error.Code != -32601 {
		t.Errorf("tasks/get without a store: %+v, want -32601", a)
	}
	if a := c.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`); a.Error != nil ||
		strings.Contains(string(a.Result), `"tasks"`) || strings.Contains(string(a.Result), TasksExtension) {
		t.Errorf("initialize without a store: %s %+v, want no tasks in the capabilities", a.Result, a.Error)
	}
	if _, err := io.WriteString(c.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if a := c.call("tools/call", `{"name":"slow","task":{}}`); a.Error != nil || strings.Contains(string(a.Result), `"task"`) || !strings.Contains(string(a.Result), "ran slow") {
		t.Errorf("tools/call with params.task without a store: %s %+v, want the result on the spot", a.Result, a.Error)
	}
}
