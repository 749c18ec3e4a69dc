package mcpfront_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/front/mcpfront"
	"github.com/toolpool/toolpool/internal/infra/discovery"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Keys of the task tests: two tenants.
const (
	keyA = "tasks-key-a-0123456789abcdef"
	keyB = "tasks-key-b-0123456789abcdef"
)

// taskTool is a tool that counts its runs and blocks each until opened
// (or cancelled).
type taskTool struct {
	mu        sync.Mutex
	runs      int
	cancelled int
	open      chan struct{}
	once      sync.Once
	started   chan struct{}
}

func (g *taskTool) release() { g.once.Do(func() { close(g.open) }) }

func (g *taskTool) counts() (runs, cancelled int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs, g.cancelled
}

func (g *taskTool) handler(ctx context.Context, in json.RawMessage) (tools.Output, error) {
	g.mu.Lock()
	g.runs++
	g.mu.Unlock()
	g.started <- struct{}{}
	select {
	case <-g.open:
		return tools.Text("opened " + string(in)), nil
	case <-ctx.Done():
		g.mu.Lock()
		g.cancelled++
		g.mu.Unlock()
		return tools.Output{}, ctx.Err()
	}
}

// taskFleet is one JetStream, one worker serving the tool "gate", and
// replicas: an orchestrator, its task store and its MCP server each.
type taskFleet struct {
	t    *testing.T
	url  string
	reg  *tools.Registry
	gate *taskTool
	keys *apikey.Set
}

func newTaskFleet(t *testing.T) *taskFleet {
	t.Helper()
	srv, _, _ := natstest.StartProvisioned(t)
	f := &taskFleet{t: t, url: srv.ClientURL(), reg: tools.NewRegistry(),
		gate: &taskTool{open: make(chan struct{}), started: make(chan struct{}, 16)}}
	t.Cleanup(f.gate.release)
	f.reg.MustRegister(tools.Tool{Name: "gate", Description: "blocks until the test opens it",
		InputSchema: json.RawMessage(`{"type":"object"}`), Handler: f.gate.handler, Timeout: time.Minute})
	pooltest.StartServer(t, f.url, f.reg)
	keys, err := apikey.Parse(nil, []byte(`[{tenant: a, key: `+keyA+`}, {tenant: b, key: `+keyB+`}]`), "keys")
	if err != nil {
		t.Fatal(err)
	}
	f.keys = keys
	return f
}

// taskReplica is one orchestrator process, as far as tasks go.
type taskReplica struct {
	nc   *nats.Conn
	http *http.Server
	url  string // its /mcp
	mcp  *mcpfront.Server
	st   *tasks.Store
	// headers, when set, replace those rpc sends ("": left out).
	headers map[string]string
}

func (f *taskFleet) replica(name string) *taskReplica {
	t := f.t
	t.Helper()
	nc := natstest.Connect(t, f.url)
	o := pooltest.StartOrchestrator(t, nc, discovery.RegistryCatalog(f.reg), func(c *pooltest.OrchestratorConfig) {
		c.Dispatch.Instance = name
	})
	j, err := js.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := tasks.Open(ctx, j, tasks.Config{Dispatcher: o.Dispatcher(), Instance: name, Lease: time.Second, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatalf("tasks.Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = st.Stop(ctx)
	})
	defs := func(context.Context) []mcpfront.Tool {
		var out []mcpfront.Tool
		for _, d := range f.reg.Definitions() {
			out = append(out, mcpfront.Tool{Definition: d})
		}
		return out
	}
	s, err := mcpfront.New(mcpfront.Config{Dispatcher: o.Dispatcher(), Tools: defs, Keys: f.keys,
		Tasks: mcpfront.FleetTasks(st), Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		_ = hs.Close()
		_ = s.Stop(context.Background())
	})
	return &taskReplica{nc: nc, http: hs, url: "http://" + ln.Addr().String() + "/mcp", mcp: s, st: st}
}

// kill ends the replica as kill -9 would, as far as the others see: its
// HTTP server closed, its NATS connection closed without a drain (no
// lease refreshed, no hand-over).
func (r *taskReplica) kill() {
	_ = r.http.Close()
	r.nc.Close()
}

// rpc posts one JSON-RPC request to the replica with key and revision
// (the MCP-Protocol-Version header) and reads the answer.
func (r *taskReplica) rpc(t *testing.T, key, revision, method, params string) taskAnswer {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":%q,"params":%s}`, method, params)
	req, err := http.NewRequest(http.MethodPost, r.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", revision)
	if revision >= "2026-07-28" { // the standard headers of the revision
		var p struct {
			Name   string `json:"name"`
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal([]byte(params), &p)
		req.Header.Set("Mcp-Method", method)
		req.Header.Set("Mcp-Name", p.Name+p.TaskID)
	}
	for k, v := range r.headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var a taskAnswer
	if err := json.Unmarshal(bytes.TrimSpace(data), &a); err != nil {
		t.Fatalf("%s: status %d, body %q: %v", method, resp.StatusCode, data, err)
	}
	return a
}

type taskAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// task is the fields of a task the tests read, in either shape.
type task struct {
	TaskID string          `json:"taskId"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
	Task   *task           `json:"task"` // 2025-11-25's CreateTaskResult
}

func (a taskAnswer) task(t *testing.T) task {
	t.Helper()
	if a.Error != nil {
		t.Fatalf("error %d: %s", a.Error.Code, a.Error.Message)
	}
	var v task
	if err := json.Unmarshal(a.Result, &v); err != nil {
		t.Fatalf("result %s: %v", a.Result, err)
	}
	if v.Task != nil {
		return *v.Task
	}
	return v
}

const ext = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// getUntil polls tasks/get (the extension's) on r until the task is no
// longer working.
func getUntil(t *testing.T, r *taskReplica, key, id string) task {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := r.rpc(t, key, "2026-07-28", "tasks/get", `{"taskId":"`+id+`",`+ext+`}`).task(t)
		if got.Status != "working" {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still working", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *taskFleet) started() {
	f.t.Helper()
	select {
	case <-f.gate.started:
	case <-time.After(waitLong):
		f.t.Fatal("the call did not reach the tool")
	}
}

// TestTasksAnyReplica: two orchestrators on one JetStream. A task created
// on A (/mcp, the extension) is working on B, then completed on B with
// the tool's result; another tenant's tasks/get is "not found"; a task
// created on A and cancelled on B is cancelled in the pool (the tool's
// run ends) and reads cancelled on A.
func TestTasksAnyReplica(t *testing.T) {
	f := newTaskFleet(t)
	a, b := f.replica("a"), f.replica("b")

	created := a.rpc(t, keyA, "2026-07-28", "tools/call", `{"name":"gate","arguments":{"n":1},`+ext+`}`).task(t)
	if created.TaskID == "" || created.Status != "working" {
		t.Fatalf("tools/call on A: %+v", created)
	}
	f.started()
	if got := b.rpc(t, keyA, "2026-07-28", "tasks/get", `{"taskId":"`+created.TaskID+`",`+ext+`}`).task(t); got.Status != "working" {
		t.Fatalf("tasks/get on B while the tool runs: %+v", got)
	}
	if ans := b.rpc(t, keyB, "2026-07-28", "tasks/get", `{"taskId":"`+created.TaskID+`",`+ext+`}`); ans.Error == nil || ans.Error.Code != -32602 {
		t.Errorf("another tenant's tasks/get: %+v, want -32602 (not found)", ans)
	}
	for _, id := range []string{"", "*", "a.>", "../" + created.TaskID, strings.Repeat("x", 100000), created.TaskID + "x"} {
		ans := b.rpc(t, keyA, "2026-07-28", "tasks/get", fmt.Sprintf(`{"taskId":%q,`+ext+`}`, id))
		if ans.Error == nil || ans.Error.Code != -32602 {
			t.Errorf("tasks/get of the id %.40q: %+v, want -32602", id, ans)
		}
	}
	f.gate.release()
	done := getUntil(t, b, keyA, created.TaskID)
	if done.Status != "completed" || !strings.Contains(string(done.Result), `opened {\"n\":1}`) {
		t.Fatalf("tasks/get on B once done: %+v %s", done, done.Result)
	}
	if runs, _ := f.gate.counts(); runs != 1 {
		t.Errorf("the tool ran %d times, want 1", runs)
	}
}

// TestTasksCancelOnAnotherReplica: a task created on A (2025-11-25's
// shape) and cancelled on B: B answers it cancelled, the tool's run is
// cancelled, and A reads it cancelled.
func TestTasksCancelOnAnotherReplica(t *testing.T) {
	f := newTaskFleet(t)
	a, b := f.replica("a"), f.replica("b")
	created := a.rpc(t, keyA, "2025-11-25", "tools/call", `{"name":"gate","arguments":{},"task":{"ttl":600000}}`).task(t)
	f.started()
	if got := b.rpc(t, keyA, "2025-11-25", "tasks/cancel", `{"taskId":"`+created.TaskID+`"}`).task(t); got.Status != "cancelled" {
		t.Fatalf("tasks/cancel on B: %+v", got)
	}
	natstest.Eventually(t, waitLong, "the tool's run cancelled", func() bool { _, c := f.gate.counts(); return c == 1 })
	if got := a.rpc(t, keyA, "2025-11-25", "tasks/get", `{"taskId":"`+created.TaskID+`"}`).task(t); got.Status != "cancelled" {
		t.Errorf("tasks/get on A: %+v, want cancelled", got)
	}
}

// TestTasksOwnerKilled: A creates a task and dies (its NATS connection
// closed without a drain) while the tool runs; B adopts it: tasks/result
// on B answers the tool's result, and the tool ran once.
func TestTasksOwnerKilled(t *testing.T) {
	f := newTaskFleet(t)
	a, b := f.replica("a"), f.replica("b")
	created := a.rpc(t, keyA, "2025-11-25", "tools/call", `{"name":"gate","arguments":{"k":2},"task":{}}`).task(t)
	f.started()
	a.kill()
	f.gate.release()
	ans := b.rpc(t, keyA, "2025-11-25", "tasks/result", `{"taskId":"`+created.TaskID+`"}`)
	if ans.Error != nil || !strings.Contains(string(ans.Result), `opened {\"k\":2}`) {
		t.Fatalf("tasks/result on B: %s %+v", ans.Result, ans.Error)
	}
	if runs, _ := f.gate.counts(); runs != 1 {
		t.Errorf("the tool ran %d times, want 1", runs)
	}
}

// stdio serves the replica's MCP server on pipes (orchestrator mcp's
// transport); it returns a function that sends one request and reads its
// answer.
func (r *taskReplica) stdio(t *testing.T) func(method, params string) taskAnswer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.mcp.ServeStdio(context.Background(), inR, outW)
		_ = outW.Close()
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		<-done
	})
	lines := bufio.NewReader(outR)
	id := 0
	return func(method, params string) taskAnswer {
		t.Helper()
		id++
		if _, err := fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params); err != nil {
			t.Fatal(err)
		}
		for {
			line, err := lines.ReadBytes('\n')
			if err != nil {
				t.Fatalf("%s: %v", method, err)
			}
			var a struct {
				ID *int `json:"id"`
				taskAnswer
			}
			if json.Unmarshal(line, &a) == nil && a.ID != nil && *a.ID == id {
				return a.taskAnswer
			}
		}
	}
}

// TestTasksStdioAnyReplica: over stdio (orchestrator mcp's transport), a
// task created through replica A is answered by replica B's stdio server:
// tasks/get while the tool runs, tasks/result once it is done, and the
// tool ran once. A's stdio client could end meanwhile: the task is the
// fleet's.
func TestTasksStdioAnyReplica(t *testing.T) {
	f := newTaskFleet(t)
	onA, onB := f.replica("a").stdio(t), f.replica("b").stdio(t)
	created := onA("tools/call", `{"name":"gate","arguments":{"via":"stdio"},`+ext+`}`).task(t)
	f.started()
	if got := onB("tasks/get", `{"taskId":"`+created.TaskID+`",`+ext+`}`).task(t); got.Status != "working" {
		t.Fatalf("tasks/get on B: %+v", got)
	}
	f.gate.release()
	ans := onB("tasks/result", `{"taskId":"`+created.TaskID+`"}`)
	if ans.Error != nil || !strings.Contains(string(ans.Result), `opened {\"via\":\"stdio\"}`) {
		t.Fatalf("tasks/result on B: %s %+v", ans.Result, ans.Error)
	}
	if runs, _ := f.gate.counts(); runs != 1 {
		t.Errorf("the tool ran %d times, want 1", runs)
	}
}

// TestTasksOfTheHTTPAPIAreNotMCPs: an async call of the HTTP API (a task
// of the same store, same tenant) is not found over MCP: its turn is
// answered in an HTTP shape.
func TestTasksOfTheHTTPAPIAreNotMCPs(t *testing.T) {
	f := newTaskFleet(t)
	a := f.replica("a")
	f.gate.release()
	ht, err := a.st.Start(t.Context(), tasks.Request{Tenant: "a", Front: "http",
		Calls: []envelope.ToolUseBlock{{Type: "tool_use", ID: "toolu_1", Name: "gate", Input: json.RawMessage(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		if ans := a.rpc(t, keyA, "2026-07-28", method, `{"taskId":"`+ht.ID+`",`+ext+`}`); ans.Error == nil || ans.Error.Code != -32602 {
			t.Errorf("%s of an HTTP async call: %+v, want -32602", method, ans)
		}
	}
}

// TestTaskHeaders: a 2026-07-28 task request's Mcp-Method and Mcp-Name
// headers must match its body, as the go-sdk checks them for the
// requests it serves: -32020 (header mismatch), HTTP 400, no task.
func TestTaskHeaders(t *testing.T) {
	f := newTaskFleet(t)
	a := f.replica("a")
	for _, c := range []struct {
		method, params string
		headers        map[string]string
	}{
		{"tools/call", `{"name":"gate",` + ext + `}`, map[string]string{"Mcp-Name": "echo"}},
		{"tools/call", `{"name":"gate",` + ext + `}`, map[string]string{"Mcp-Name": ""}},
		{"tools/call", `{"name":"gate",` + ext + `}`, map[string]string{"Mcp-Method": ""}},
		{"tasks/get", `{"taskId":"abc",` + ext + `}`, map[string]string{"Mcp-Method": "tasks/cancel"}},
		{"tasks/get", `{"taskId":"abc",` + ext + `}`, map[string]string{"Mcp-Name": "abd"}},
	} {
		a.headers = c.headers
		if ans := a.rpc(t, keyA, "2026-07-28", c.method, c.params); ans.Error == nil || ans.Error.Code != -32020 {
			t.Errorf("%s with headers %v: %+v, want -32020", c.method, c.headers, ans)
		}
	}
	if runs, _ := f.gate.counts(); runs != 0 {
		t.Errorf("the tool ran %d times, want none", runs)
	}
}

// TestTaskResultWaitEndsWithTheServer: a tasks/result waiting for a
// working task is answered when the server ends its streams (before the
// HTTP server's drain), with an error that says to ask again; the task
// goes on, and another replica answers it.
func TestTaskResultWaitEndsWithTheServer(t *testing.T) {
	f := newTaskFleet(t)
	a, b := f.replica("a"), f.replica("b")
	created := a.rpc(t, keyA, "2025-11-25", "tools/call", `{"name":"gate","task":{}}`).task(t)
	f.started()
	answered := make(chan taskAnswer, 1)
	go func() { answered <- a.rpc(t, keyA, "2025-11-25", "tasks/result", `{"taskId":"`+created.TaskID+`"}`) }()
	// The wait may start after EndStreams: it then ends at once, as it
	// should (streams opened later end too).
	a.mcp.EndStreams()
	select {
	case ans := <-answered:
		if ans.Error == nil || !strings.Contains(ans.Error.Message, "ask again") {
			t.Errorf("tasks/result at EndStreams: %+v, want an error saying to ask again", ans)
		}
	case <-time.After(waitLong):
		t.Fatal("tasks/result still waits after EndStreams")
	}
	f.gate.release()
	if ans := b.rpc(t, keyA, "2025-11-25", "tasks/result", `{"taskId":"`+created.TaskID+`"}`); ans.Error != nil {
		t.Errorf("tasks/result on B: %+v", ans.Error)
	}
}

// TestTasksGoSDKClient: the go-sdk client (which knows no tasks) on a
// server with tasks: initialize (with capabilities.tasks added), tools/list
// (with execution added) and tools/call answer as before.
func TestTasksGoSDKClient(t *testing.T) {
	f := newTaskFleet(t)
	a := f.replica("a")
	f.gate.release()
	cs, err := connect(t, a.url, keyA, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 1 || list.Tools[0].Name != "gate" {
		t.Fatalf("tools/list: %+v, %v", list, err)
	}
	res, err := call(t, cs, "gate", map[string]any{"x": 1})
	if err != nil || res.IsError || text(t, res) != `opened {"x":1}` {
		t.Fatalf("tools/call: %+v, %v", res, err)
	}
}
