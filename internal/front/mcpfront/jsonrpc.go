package mcpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// methods are the requests an MCP client may send that this server
// answers (those the go-sdk serves, through protocol revision
// 2026-07-28), and the tasks' (tasks.go). A call of any other method is
// answered "method not found" here.
var methods = map[string]bool{
	"initialize": true, "ping": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true,
	"logging/setLevel": true, "completion/complete": true,
	"server/discover": true, "subscriptions/listen": true,
	"tasks/get": true, "tasks/update": true, "tasks/cancel": true, "tasks/result": true,
}

// notifications are the notifications a client may send that the go-sdk
// reads; others are dropped, as JSON-RPC has them (no answer).
var notifications = map[string]bool{
	"notifications/initialized": true, "notifications/cancelled": true,
	"notifications/progress": true, "notifications/roots/list_changed": true,
}

// badMessage is a message refused before the go-sdk sees it: the error to
// answer, and the id to answer it with (nil: JSON null).
type badMessage struct {
	id  any
	err *jsonrpc.Error
	// drop: a notification nobody reads; nothing is answered.
	drop bool
	// unread: the message could not be read as a JSON object (it may not
	// be JSON at all).
	unread bool
}

// wireMessage is what checkMessage reads of one message.
type wireMessage struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// goodMessage is a message checkMessage let through: a request or a
// notification (method not empty), or a response.
type goodMessage struct {
	id     any // int64 or string; nil for a notification
	method string
	params json.RawMessage
	batch  bool // one of a batch
}

// checkMessage checks data as one JSON-RPC message or a batch: not JSON
// is a parse error (-32700); not a JSON-RPC 2.0 message is an invalid
// request (-32600); a call of a method MCP does not have is "method not
// found" (-32601). A lone notification of a method nobody reads is
// dropped. A batch of more than maxCalls messages is refused whole (one
// invalid-request error, id null): nothing of it runs. nil: the go-sdk
// takes it; seen, when not nil, was called with each message of it.
func checkMessage(data []byte, maxCalls int, seen func(goodMessage)) *badMessage {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(data, &batch); err != nil || len(batch) == 0 {
			if !json.Valid(data) {
				return parseError()
			}
			return &badMessage{err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: an empty batch"}}
		}
		if len(batch) > maxCalls {
			return &badMessage{err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
				"invalid request: the batch holds %d messages, over the limit of %d per request (the HTTP API's limit of tool calls per request); nothing of it was run: send at most %d per request",
				len(batch), maxCalls, maxCalls)}}
		}
		var good []goodMessage
		ids := make(map[any]bool)
		for _, m := range batch {
			g, bad := checkOne(m)
			if bad != nil && !bad.drop {
				return bad
			}
			if bad == nil {
				// The go-sdk tracks a batch's calls by id: a repeated one
				// would end the stdio session, and is not JSON-RPC anyway.
				if g.method != "" && g.id != nil {
					if ids[g.id] {
						return &badMessage{err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
							"invalid request: the batch holds more than one request with the id %v; nothing of it was run", jsonID(g.id))}}
					}
					ids[g.id] = true
				}
				g.batch = true
				good = append(good, g)
			}
		}
		if seen != nil {
			for _, g := range good {
				seen(g)
			}
		}
		return nil
	}
	g, bad := checkOne(data)
	if bad == nil && seen != nil {
		seen(g)
	}
	// A message checkOne could not read may not be JSON at all. Checked
	// only then: a good message is scanned once, by checkOne's Unmarshal.
	if bad != nil && bad.unread && !json.Valid(data) {
		return parseError()
	}
	return bad
}

func parseError() *badMessage {
	return &badMessage{err: &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error: the message is not valid JSON"}}
}

func checkOne(data []byte) (goodMessage, *badMessage) {
	invalid := func(id any, why string) *badMessage {
		return &badMessage{id: id, err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request: " + why}}
	}
	var m wireMessage
	if len(bytes.TrimSpace(data)) == 0 || data[0] != '{' || json.Unmarshal(data, &m) != nil {
		bad := invalid(nil, "a JSON-RPC message is a JSON object")
		bad.unread = true
		return goodMessage{}, bad
	}
	var id any
	if len(m.ID) > 0 {
		if err := json.Unmarshal(m.ID, &id); err != nil {
			return goodMessage{}, invalid(nil, "bad id")
		}
		switch v := id.(type) {
		case string:
		case float64:
			if v != float64(int64(v)) {
				return goodMessage{}, invalid(nil, "the id must be a string or an integer")
			}
			id = int64(v)
		default:
			return goodMessage{}, invalid(nil, "the id must be a string or an integer")
		}
	}
	if m.JSONRPC == nil || *m.JSONRPC != "2.0" {
		return goodMessage{}, invalid(id, `"jsonrpc" must be "2.0"`)
	}
	// The go-sdk reads "error" in any message, and one it cannot read
	// ends the stdio session.
	if len(m.Error) > 0 && !bytes.Equal(m.Error, []byte("null")) {
		var e struct {
			Code    *int64  `json:"code"`
			Message *string `json:"message"`
		}
		if m.Error[0] != '{' || json.Unmarshal(m.Error, &e) != nil || e.Code == nil || e.Message == nil {
			return goodMessage{}, invalid(id, `"error" must be an object with an integer "code" and a string "message"`)
		}
	}
	if len(m.Method) == 0 {
		if id == nil || (len(m.Result) == 0) == (len(m.Error) == 0) {
			return goodMessage{}, invalid(id, "a message needs a method, or an id with a result or an error")
		}
		return goodMessage{id: id}, nil // a response to a request of the server's
	}
	var method string
	if json.Unmarshal(m.Method, &method) != nil || method == "" {
		return goodMessage{}, invalid(id, `"method" must be a string`)
	}
	switch {
	case id != nil && !methods[method]:
		return goodMessage{}, &badMessage{id: id, err: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
			Message: fmt.Sprintf("method not found: %q (this server serves tools: tools/list and tools/call)", method)}}
	case id == nil && !notifications[method]:
		return goodMessage{}, &badMessage{drop: true}
	}
	return goodMessage{id: id, method: method, params: m.Params}, nil
}

// jsonID is id as JSON, for a message: a string quoted.
func jsonID(id any) string {
	data, _ := json.Marshal(id)
	return string(data)
}

// isBatch reports whether data is a JSON-RPC batch (an array).
func isBatch(data []byte) bool {
	data = bytes.TrimSpace(data)
	return len(data) > 0 && data[0] == '['
}

// batchesAfter reports whether a session initialized with params may
// still send batches: the go-sdk negotiates a revision it does not know
// (or none) to its latest, and refuses batches from 2025-06-18 on, which
// ends the stdio session. ok false: params are not an initialize's the
// go-sdk takes; it does not initialize the session with them.
func batchesAfter(params json.RawMessage) (batches, ok bool) {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if len(params) == 0 || bytes.Equal(params, []byte("null")) || json.Unmarshal(params, &p) != nil {
		return false, false
	}
	return p.ProtocolVersion == "2024-11-05" || p.ProtocolVersion == "2025-03-26", true
}

// errorResponse is a JSON-RPC error response, as one line of JSON.
func errorResponse(id any, e *jsonrpc.Error) []byte {
	data, err := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", id, e})
	if err != nil {
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	return data
}

// ServeStdio serves one MCP session on in and out, newline-delimited JSON
// (the stdio transport), until in ends or ctx is done. A line that is not
// a JSON-RPC message, or a call of a method MCP does not have, is
// answered with its JSON-RPC error and the session goes on; a line over
// MaxBodyBytes is skipped and answered with an invalid-request error.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	w := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	filtered := make(chan struct{})
	tasks := s.stdioTasks(ctx)
	defer tasks.end()
	go func() {
		defer close(filtered)
		pw.CloseWithError(s.filterLines(in, pw, w, tasks))
	}()
	err := s.mcp.Run(ctx, &mcp.IOTransport{Reader: pr, Writer: nopWriteCloser{w}})
	_ = pr.CloseWithError(io.EOF)
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// filterLines copies the good lines of in to good and answers the bad
// ones on out, and the task requests through tasks. It returns nil at the
// end of in.
func (s *Server) filterLines(in io.Reader, good io.Writer, out io.Writer, tasks *stdioTasks) error {
	br := bufio.NewReaderSize(in, 64<<10)
	var line []byte
	tooLong := false
	// batches: whether the session may send batches; false from the first
	// initialize of 2025-06-18 or later (or of any revision the go-sdk
	// does not know), since the go-sdk ends the session on a batch then.
	// It stays false: the go-sdk keeps the revision of the first
	// initialize it takes.
	batches := true
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			line = append(line, chunk...)
			if int64(len(line)) > s.cfg.MaxBodyBytes {
				tooLong, line = true, line[:0]
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			_, _ = out.Write(append(errorResponse(nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: fmt.Sprintf("the message is over the limit of %d bytes", s.cfg.MaxBodyBytes)}), '\n'))
		} else if len(bytes.TrimSpace(line)) > 0 {
			var m goodMessage
			var inits []json.RawMessage
			bad := checkMessage(line, s.cfg.MaxCalls, func(g goodMessage) {
				m = g
				if g.method == "initialize" && g.id != nil {
					inits = append(inits, g.params)
				}
			})
			if bad == nil && !batches && isBatch(line) {
				bad = &badMessage{err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
					Message: "invalid request: the session's protocol revision (2025-06-18 or later) has no JSON-RPC batches; nothing of it was run: send the messages one a line"}}
			}
			if bad == nil {
				for _, p := range inits {
					if b, ok := batchesAfter(p); ok {
						batches = batches && b
					}
				}
			}
			if bad != nil {
				if !bad.drop {
					if _, werr := out.Write(append(errorResponse(bad.id, bad.err), '\n')); werr != nil {
						return werr
					}
				}
			} else if !tasks.take(m, out) {
				if line[len(line)-1] != '\n' {
					line = append(line, '\n')
				}
				if _, werr := good.Write(line); werr != nil {
					return werr
				}
			}
		}
		line, tooLong = line[:0], false
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// lockedWriter serializes the writes of the go-sdk and of filterLines:
// each is one whole line.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes p, one writer at a time.
func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

type nopWriteCloser struct{ io.Writer }

// Close does nothing: the caller owns the writer.
func (nopWriteCloser) Close() error { return nil }
