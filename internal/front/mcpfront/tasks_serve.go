package mcpfront

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The two transports of task requests: streamable HTTP (a JSON answer to
// the POST) and stdio (a line on the output, written when the answer is
// ready: the next lines are read meanwhile).

// serveTaskHTTP reports whether the POST r, whose one message is m, is a
// task request (tasks.go); if so it has answered it. The request's
// tenant is its API key's; no session is needed: any replica answers.
func (s *Server) serveTaskHTTP(w http.ResponseWriter, r *http.Request, m goodMessage) bool {
	in, ok := s.taskRoute(m, r.Header.Get("Mcp-Protocol-Version"))
	if !ok {
		return false
	}
	if err := taskHeaders(r.Header, in); err != nil {
		writeError(w, http.StatusBadRequest, m.id, &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: err.Error()})
		return true
	}
	in.key = keyOfInfo(auth.TokenInfoFromContext(r.Context()))
	// The conversation for the repeated-failure advice: the session of a
	// 2025-11-25 client, one per call otherwise.
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		in.session = "mcp-" + id
	} else {
		in.session = "mcp-task-" + rand.Text()
	}
	ctx := r.Context()
	if m.method == "tasks/result" {
		// A wait lasts as long as the task: EndStreams ends it, as it
		// ends the GET streams, so that the HTTP server's drain does not
		// wait for it; the client asks again, of any replica.
		var end func()
		ctx, end = s.streams.track(ctx)
		defer end()
	}
	body := s.serveTask(ctx, in)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return true
}

// stdioTasks serves the task requests of one stdio connection, each on
// a goroutine of its own.
type stdioTasks struct {
	s     *Server
	ctx   context.Context // the connection's
	waits context.Context // tasks/result's waits: ended with the connection
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

func (s *Server) stdioTasks(ctx context.Context) *stdioTasks {
	waits, stop := context.WithCancel(ctx)
	return &stdioTasks{s: s, ctx: ctx, waits: waits, stop: stop}
}

// take reports whether m (a line) is a task request; if so its answer will be
// written on out.
func (t *stdioTasks) take(m goodMessage, out io.Writer) bool {
	in, ok := t.s.taskRoute(m, "")
	if !ok {
		return false
	}
	in.session = t.s.stdio
	ctx := t.ctx
	if m.method == "tasks/result" {
		ctx = t.waits
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		_, _ = out.Write(append(t.s.serveTask(ctx, in), '\n'))
	}()
	return true
}

// end ends the waits of tasks/result and waits for the answers in
// progress: a request read before the input ended is answered.
func (t *stdioTasks) end() {
	t.stop()
	t.wg.Wait()
}

// taskHeaders checks the standard headers of a 2026-07-28 request as the
// go-sdk does for the requests it serves (Mcp-Method, and Mcp-Name for
// tools/call): the task requests do not reach it. For tasks/* the
// extension has the client set Mcp-Name to the taskId (for routers): a
// different one is refused, a missing one is let through (any replica
// answers: nothing here routes on it).
func taskHeaders(h http.Header, in taskIn) error {
	if v := h.Get("Mcp-Protocol-Version"); v == "" || v < revisionStateless {
		return nil
	}
	method := h.Get("Mcp-Method")
	switch {
	case method == "":
		return errors.New("missing required Mcp-Method header")
	case method != in.m.method:
		return fmt.Errorf("header mismatch: Mcp-Method header value %q does not match body value %q", method, in.m.method)
	}
	name, ok := h.Get("Mcp-Name"), len(h.Values("Mcp-Name")) > 0
	body := in.p.TaskID
	if in.m.method == "tools/call" {
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(in.m.params, &p)
		if body = p.Name; !ok {
			return errors.New(`missing required Mcp-Name header for method "tools/call"`)
		}
	}
	if ok && name != body {
		return fmt.Errorf("header mismatch: Mcp-Name header value %q does not match body value %q", name, body)
	}
	return nil
}
