package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/infra/tracing"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Handler serves the orchestrator's agent-facing HTTP API:
// POST /v1/tool_calls and GET /v1/tools. Mount it on "/v1/". It is safe
// for concurrent use.
type Handler struct {
	cfg Config
	log *slog.Logger
}

// New returns a Handler for cfg, with defaults applied.
func New(cfg Config) (*Handler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg, log: cfg.Logger}, nil
}

// ServeHTTP routes a request. Errors are JSON ErrorResponse bodies. With
// Config.Keys, every request needs an API key.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Tracer.On() { // a server span: trace.go
		sw, r2, span := h.startSpan(w, r)
		defer endSpan(span, sw)
		w, r = sw, r2
	}
	if h.cfg.Keys.Len() > 0 {
		k, err := authenticate(h.cfg.Keys, r)
		if err != nil {
			h.cfg.Metrics.Refused(RefusedUnauthorized)
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolpool"`)
			h.fail(w, r, http.StatusUnauthorized, ErrorUnauthorized, err.Error())
			return
		}
		r = r.WithContext(apikey.NewContext(r.Context(), k))
		if h.cfg.Tracer.On() {
			spanTenant(r, k.Tenant)
		}
	}
	if id, ok := strings.CutPrefix(r.URL.Path, PathToolCalls+"/"); ok {
		h.taskRoute(w, r, id) // async calls: async.go
		return
	}
	switch r.URL.Path {
	case PathToolCalls:
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			h.fail(w, r, http.StatusMethodNotAllowed, ErrorMethodNotAllowed,
				fmt.Sprintf("%s %s is not served; POST the assistant message", r.Method, PathToolCalls))
			return
		}
		h.toolCalls(w, r)
	case PathTools:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			h.fail(w, r, http.StatusMethodNotAllowed, ErrorMethodNotAllowed,
				fmt.Sprintf("%s %s is not served; use GET", r.Method, PathTools))
			return
		}
		h.tools(w, r)
	default:
		h.fail(w, r, http.StatusNotFound, ErrorNotFound,
			fmt.Sprintf("no such endpoint %s; the API serves POST %s and GET %s", r.URL.Path, PathToolCalls, PathTools))
	}
}

// toolCallsRequest is a POST /v1/tool_calls, read and checked.
type toolCallsRequest struct {
	turn    *turn
	session string
	timeout time.Duration
	query   url.Values               // the request's query, parsed once
	rc      *http.ResponseController // the connection's deadlines; nil when it has none
}

// toolCalls serves POST /v1/tool_calls: the calls of the turn run under
// the request's trace context, tenant and priority, and are answered in
// the turn's shape.
func (h *Handler) toolCalls(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req, ok := h.readToolCalls(w, r)
	if !ok {
		return
	}
	traceparent := r.Header.Get(envelope.HeaderTraceparent)
	if h.cfg.Tracer.On() {
		traceparent = tracing.FromContext(r.Context()) // the request's span: its calls' parent
	}
	if !dispatch.ValidTraceparent(traceparent) {
		traceparent = dispatch.NewTraceparent()
	}
	ctx, cancel := context.WithTimeout(dispatch.WithTraceparent(r.Context(), traceparent), req.timeout)
	defer cancel()
	key, _ := apikey.FromContext(r.Context())
	tenant := ""
	if key != nil {
		tenant = key.Tenant
		ctx = dispatch.WithTenant(ctx, tenant)
	}
	if ctx, ok = h.withScheduling(ctx, w, r, req.query, key); !ok {
		return
	}
	if h.async(ctx, w, r, req, key, traceparent) { // Prefer: respond-async: async.go
		return
	}
	ctx = withPolicy(ctx, r, key, &req.turn.report)
	results, sent, err := h.run(ctx, req.session, req.turn, key)
	status, ok := h.outcome(w, r, tenant, sent, err)
	if !ok {
		return
	}
	format, calls, session, rc := req.turn.shape.format(), len(req.turn.calls), req.session, req.rc
	setCacheHeader(w, &req.turn.report, calls, req.turn.sent)
	w.Header().Set(envelope.HeaderTraceparent, traceparent)
	w.Header().Set(HeaderFormat, string(format))
	if idx := errorIndexes(results); idx != "" {
		w.Header().Set(HeaderErrorIndexes, idx)
	}
	e, body, status := h.encode(r, status, req.turn.shape.answer(req.turn, results))
	// From here on the answer's bytes are all the request holds: the body
	// (the calls' inputs share it), the calls and the results are let go,
	// so that a client slow to read its answer pins no more
	// (docs/operations.md). The answer has WriteTimeout to be written.
	req, results = toolCallsRequest{}, nil
	if rc != nil {
		_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
	}
	h.send(w, r, status, body)
	putEncoder(e)
	if h.log.Enabled(r.Context(), slog.LevelDebug) { // the attributes cost allocations even when dropped
		h.log.DebugContext(r.Context(), "tool calls",
			slog.String("format", string(format)), slog.Int("calls", calls), slog.Int("status", status),
			slog.String("tenant", tenant), slog.String("session", session), slog.Duration("elapsed", time.Since(start)))
	}
}

// readToolCalls reads and checks a POST /v1/tool_calls: its content
// type, its parameters (format, session, timeout) and its body, the turn.
// A request that fails is answered here, and ok is false.
func (h *Handler) readToolCalls(w http.ResponseWriter, r *http.Request) (_ toolCallsRequest, ok bool) {
	if !isJSON(r.Header.Get("Content-Type")) {
		h.cfg.Metrics.Refused(RefusedContentType)
		h.fail(w, r, http.StatusUnsupportedMediaType, ErrorUnsupportedMediaType,
			"the body must be sent as Content-Type: application/json")
		return toolCallsRequest{}, false
	}
	q := r.URL.Query()
	forced, err := shapeNamed(q.Get("format"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, ErrorInvalidRequest, err.Error())
		return toolCallsRequest{}, false
	}
	session, field := r.Header.Get(HeaderSession), HeaderSession+" header"
	if session == "" {
		session, field = q.Get("session"), "session parameter"
	}
	if problem := checkID(session); problem != "" {
		h.fail(w, r, http.StatusBadRequest, ErrorInvalidRequest, "the "+field+" "+problem)
		return toolCallsRequest{}, false
	}
	timeout, err := h.timeout(q.Get("timeout"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, ErrorInvalidRequest, err.Error())
		return toolCallsRequest{}, false
	}
	body, rc, ok := h.readBody(w, r, timeout)
	if !ok {
		return toolCallsRequest{}, false
	}
	t, err := parseTurn(body, forced, h.cfg.MaxCalls)
	if err != nil {
		var bad *badRequest
		if errors.As(err, &bad) {
			h.fail(w, r, http.StatusBadRequest, ErrorInvalidRequest, bad.msg)
			return toolCallsRequest{}, false
		}
		h.fail(w, r, http.StatusInternalServerError, ErrorInternal, "the request could not be read")
		return toolCallsRequest{}, false
	}
	return toolCallsRequest{turn: t, session: session, timeout: timeout, query: q, rc: rc}, true
}

// readBody reads the body of a POST /v1/tool_calls, at most MaxBodyBytes;
// one that cannot be read is answered here, and ok is false. rc sets the
// connection's deadlines; it is nil when w has none (a test's recorder).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) (_ []byte, rc *http.ResponseController, ok bool) {
	if r.ContentLength > h.cfg.MaxBodyBytes {
		// Answered before the body is read: a client that sent Expect:
		// 100-continue gets no 100 Continue and sends no body; another
		// gets the 413 and the connection's end rather than a reset
		// halfway through sending it.
		w.Header().Set("Connection", "close")
		h.fail(w, r, http.StatusRequestEntityTooLarge, ErrorTooLarge, tooLargeMessage(h.cfg.MaxBodyBytes))
		return nil, nil, false
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes), r.ContentLength, h.cfg.MaxBodyBytes)
	rc = http.NewResponseController(w)
	if err == nil {
		// The body is in: the answer may take as long as the calls, and the
		// read deadline the server set for the body (Server) must not cut
		// the connection meanwhile. Writing it gets WriteTimeout once ready.
		if rc.SetReadDeadline(time.Time{}) != nil {
			return body, nil, true
		}
		_ = rc.SetWriteDeadline(time.Now().Add(timeout + h.cfg.WriteTimeout))
		return body, rc, true
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		h.fail(w, r, http.StatusRequestTimeout, ErrorTimeout, "the body did not arrive in time; send it at once")
	case errors.As(err, &tooLarge):
		w.Header().Set("Connection", "close") // the rest of the body is not read
		h.fail(w, r, http.StatusRequestEntityTooLarge, ErrorTooLarge, tooLargeMessage(tooLarge.Limit))
	case r.Context().Err() != nil:
		h.fail(w, r, StatusClientClosed, ErrorClientClosed, "the client went away while sending the body")
	default:
		h.fail(w, r, http.StatusBadRequest, ErrorInvalidRequest, "the body could not be read: "+err.Error())
	}
	return nil, nil, false
}

// maxPrealloc is the most readAll allocates for a body before its bytes
// come.
const maxPrealloc = 64 << 10

// readAll is io.ReadAll(body) into a buffer sized by the request's
// Content-Length when it has one within limit (at most maxPrealloc up
// front): for the usual body one allocation, no copies.
func readAll(body io.Reader, contentLength, limit int64) ([]byte, error) {
	if contentLength < 0 || contentLength > limit {
		return io.ReadAll(body)
	}
	// One more byte than declared: the read that finds the end. At most
	// maxPrealloc up front: a Content-Length is only a claim, and a client
	// that declares the limit and sends nothing must not make the server
	// hold that much per request; a larger body grows the buffer as it
	// comes.
	buf := make([]byte, 0, min(contentLength+1, maxPrealloc))
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// outcome counts the calls a turn sent and is the status of its answer:
// 200, or 429 when admission control refused the turn (its results say
// so: an agent that appends the body tells the model the truth). Any other
// error is answered here, and ok is false.
func (h *Handler) outcome(w http.ResponseWriter, r *http.Request, tenant string, sent int, err error) (status int, ok bool) {
	if err == nil {
		h.cfg.Metrics.ToolCalls(tenant, OutcomeDispatched, sent)
		return http.StatusOK, true
	}
	if saturated, ok := errors.AsType[*dispatch.SaturatedError](err); ok {
		h.cfg.Metrics.ToolCalls(tenant, OutcomeSaturated, sent)
		setRetryAfter(w, saturated.RetryAfter)
		return http.StatusTooManyRequests, true
	}
	if over, ok := errors.AsType[*policy.ExhaustedError](err); ok {
		h.cfg.Metrics.ToolCalls(tenant, OutcomeOverBudget, sent)
		setRetryAfter(w, over.RetryAfter)
		return http.StatusTooManyRequests, true
	}
	switch {
	case errors.Is(err, errCannotList):
		setRetryAfter(w, h.cfg.RetryAfter)
		h.fail(w, r, http.StatusServiceUnavailable, ErrorUnavailable, "the tools this API key may call cannot be listed right now; retry after the Retry-After delay")
	case errors.Is(err, dispatch.ErrUnavailable):
		setRetryAfter(w, h.cfg.RetryAfter)
		h.fail(w, r, http.StatusServiceUnavailable, ErrorUnavailable,
			"the tool pool did not take the calls: its message server is unreachable or did not store them in time; retry after the Retry-After delay")
	case r.Context().Err() != nil:
		h.fail(w, r, StatusClientClosed, ErrorClientClosed, "the client went away before the results were in")
	default:
		h.log.WarnContext(r.Context(), "dispatching tool calls failed", slog.Any("error", err))
		h.fail(w, r, http.StatusInternalServerError, ErrorInternal, "the tool calls could not be handled")
	}
	return 0, false
}

// setRetryAfter sends d as a Retry-After header in whole seconds, rounded
// as the model's text about the same wait is (classify.RetryAfterSeconds).
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(classify.RetryAfterSeconds(d)))
}

// errCannotList: the tools a restricted key may call could not be listed.
var errCannotList = errors.New("httpapi: the tool definitions cannot be listed")

// isJSON reports whether a Content-Type is application/json.
func isJSON(contentType string) bool {
	if contentType == "application/json" { // what clients send, read without the parser's map
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// run answers the calls of t: the local answers as they are, the others
// through one Dispatch, in t's order; sent is how many went to Dispatch.
// A call to a tool the key may not use is answered here as if the tool did
// not exist, naming only the key's tools. When admission control refuses
// the turn, every dispatched call is answered with dispatch.SaturatedResult
// and the *dispatch.SaturatedError is returned with the results.
func (h *Handler) run(ctx context.Context, session string, t *turn, key *apikey.Key) (results []envelope.Result, sent int, err error) {
	restricted := key != nil && key.Tools != nil
	if !restricted && !slices.ContainsFunc(t.local, func(r *envelope.Result) bool { return r != nil }) {
		return h.dispatchAll(ctx, session, t) // every call goes to Dispatch, as it is
	}
	results = make([]envelope.Result, len(t.calls))
	var allowed []string // the key's live tools; listed once, if needed
	if restricted {
		defs, err := h.cfg.Definitions.Definitions(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %w", errCannotList, err)
		}
		for _, d := range defs {
			if key.Allows(d.Name) {
				allowed = append(allowed, d.Name)
			}
		}
	}
	var send []envelope.ToolUseBlock
	var at []int
	for i := range t.calls {
		if t.local[i] != nil {
			results[i] = *t.local[i]
			continue
		}
		if c := t.calls[i]; restricted && !slices.Contains(allowed, c.Name) {
			results[i] = *notAllowedResult(c.ID, c.Name, allowed)
			h.cfg.Metrics.ToolCalls(key.Tenant, OutcomeNotAllowed, 1)
			continue
		}
		send = append(send, t.calls[i])
		at = append(at, i)
	}
	if len(send) == 0 {
		return results, 0, nil
	}
	t.sent = at
	got, err := h.cfg.Dispatcher.Dispatch(ctx, session, send)
	if saturated, ok := errors.AsType[*dispatch.SaturatedError](err); ok {
		for _, i := range at {
			results[i] = dispatch.SaturatedResult(t.calls[i].ID, t.calls[i].Name, saturated)
		}
		return results, len(send), err
	}
	if over, ok := errors.AsType[*policy.ExhaustedError](err); ok {
		if len(over.Results) != len(send) {
			return nil, len(send), fmt.Errorf("httpapi: the gate refused %d calls with %d results", len(send), len(over.Results))
		}
		for j, i := range at {
			results[i] = over.Results[j]
		}
		return results, len(send), err
	}
	if err != nil {
		return nil, len(send), err
	}
	if len(got) != len(send) {
		return nil, len(send), fmt.Errorf("httpapi: the dispatcher returned %d results for %d calls", len(got), len(send))
	}
	for j, i := range at {
		results[i] = got[j]
	}
	return results, len(send), nil
}

// dispatchAll is run for a turn whose calls all go to Dispatch: they are
// sent as they are, and the dispatcher's results are the answer's.
func (h *Handler) dispatchAll(ctx context.Context, session string, t *turn) (results []envelope.Result, sent int, err error) {
	if len(t.calls) == 0 {
		return []envelope.Result{}, 0, nil
	}
	got, err := h.cfg.Dispatcher.Dispatch(ctx, session, t.calls)
	if saturated, ok := errors.AsType[*dispatch.SaturatedError](err); ok {
		results = make([]envelope.Result, len(t.calls))
		for i, c := range t.calls {
			results[i] = dispatch.SaturatedResult(c.ID, c.Name, saturated)
		}
		return results, len(t.calls), err
	}
	if over, ok := errors.AsType[*policy.ExhaustedError](err); ok {
		if len(over.Results) != len(t.calls) {
			return nil, len(t.calls), fmt.Errorf("httpapi: the gate refused %d calls with %d results", len(t.calls), len(over.Results))
		}
		return over.Results, len(t.calls), err
	}
	if err != nil {
		return nil, len(t.calls), err
	}
	if len(got) != len(t.calls) {
		return nil, len(t.calls), fmt.Errorf("httpapi: the dispatcher returned %d results for %d calls", len(got), len(t.calls))
	}
	return got, len(t.calls), nil
}

// notAllowedResult answers a call to a tool the API key may not use with
// the text of a call to a tool that does not exist, listing the key's
// tools only: a tenant learns nothing of the tools of others.
func notAllowedResult(id, tool string, allowed []string) *envelope.Result {
	d := classify.Classify(&classify.UnknownToolError{Tool: tool, Available: allowed})
	r := localError(id, tool, d.Message(classify.MessageInput{Tool: tool}))
	r.Code = classify.CodeUnknownTool
	return r
}

// tools serves GET /v1/tools, in the shape ?format= names (Anthropic's by
// default).
func (h *Handler) tools(w http.ResponseWriter, r *http.Request) {
	s, err := shapeNamed(r.URL.Query().Get("format"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, ErrorInvalidRequest, err.Error())
		return
	}
	if s == nil {
		s = defaultShape
	}
	defs, err := h.cfg.Definitions.Definitions(r.Context())
	if err != nil {
		if r.Context().Err() != nil {
			h.fail(w, r, StatusClientClosed, ErrorClientClosed, "the client went away")
			return
		}
		h.log.WarnContext(r.Context(), "listing the tools failed", slog.Any("error", err))
		setRetryAfter(w, h.cfg.RetryAfter)
		h.fail(w, r, http.StatusServiceUnavailable, ErrorUnavailable, "the tool definitions cannot be listed right now; retry after the Retry-After delay")
		return
	}
	defs = slices.Clone(defs)
	if k, ok := apikey.FromContext(r.Context()); ok && k.Tools != nil {
		defs = slices.DeleteFunc(defs, func(d tools.Definition) bool { return !k.Allows(d.Name) })
	}
	slices.SortFunc(defs, func(a, b tools.Definition) int { return strings.Compare(a.Name, b.Name) })
	h.write(w, r, http.StatusOK, s.toolList(defs))
}

// MinTimeout is the shortest timeout a request gets: one asking for
// less gets this. A call must be published and acknowledged within its
// timeout; a few microseconds could not be, and such calls were answered
// 500 or a misleading 503 and left as expired dead letters.
const MinTimeout = time.Second

// timeout reads the timeout query parameter: a Go duration ("90s", "2m")
// or a number of seconds ("90", "2.5"). Missing: DefaultTimeout; over
// MaxTimeout: MaxTimeout; under MinTimeout: MinTimeout.
func (h *Handler) timeout(s string) (time.Duration, error) {
	if s == "" {
		return h.cfg.DefaultTimeout, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
			return 0, fmt.Errorf("timeout %q: want a duration such as 90s or 2m, or a number of seconds", s)
		}
		if secs > h.cfg.MaxTimeout.Seconds() {
			return h.cfg.MaxTimeout, nil
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d <= 0 {
		return 0, fmt.Errorf("timeout %q: must be positive", s)
	}
	return min(max(d, MinTimeout), h.cfg.MaxTimeout), nil
}

// write sends v as JSON.
func (h *Handler) write(w http.ResponseWriter, r *http.Request, status int, v any) {
	e, body, status := h.encode(r, status, v)
	h.send(w, r, status, body)
	putEncoder(e)
}

// encode writes v as JSON: body is the answer, held by e or (a large
// answer an appendJSON wrote) on its own; status is 500 when v could not
// be encoded. Give e back with putEncoder once body is sent.
func (h *Handler) encode(r *http.Request, status int, v any) (_ *encoder, body []byte, _ int) {
	e := getEncoder()
	if a, ok := v.(jsonAppender); ok {
		if out, ok := a.appendJSON(e.buf.AvailableBuffer()); ok {
			if cap(out) > e.buf.Available() {
				return e, out, status // grown past the buffer: sent as it is, not copied
			}
			e.buf.Write(out)
			return e, e.buf.Bytes(), status
		}
	}
	if err := e.enc.Encode(v); err != nil {
		h.log.WarnContext(r.Context(), "encoding the answer failed", slog.Any("error", err))
		status = http.StatusInternalServerError
		e.buf.Reset()
		_ = json.NewEncoder(&e.buf).Encode(ErrorResponse{Error: ErrorDetail{Type: ErrorInternal, Message: "the answer could not be encoded"}})
	}
	if n := e.buf.Len(); e.buf.Cap() > maxPooledAnswer && e.buf.Cap()-n > n/8 {
		// A large answer in a buffer grown by doubling: sent from a copy
		// of its size, so that a client slow to read it holds no more.
		body = bytes.Clone(e.buf.Bytes())
		e.buf = bytes.Buffer{}
		return e, body, status
	}
	return e, e.buf.Bytes(), status
}

// send writes body, an answer in JSON.
func (h *Handler) send(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// jsonAppender is an answer that can write itself as the encoder would
// (UserMessage); ok false leaves it to the encoder.
type jsonAppender interface {
	appendJSON(dst []byte) (_ []byte, ok bool)
}

// encoder is an answer's JSON encoder and the buffer it writes to, kept
// in encoders between answers.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoders sync.Pool

// maxPooledAnswer caps the buffers kept in encoders: a rare large answer
// does not pin its memory.
const maxPooledAnswer = 64 << 10

func getEncoder() *encoder {
	if e, ok := encoders.Get().(*encoder); ok {
		return e
	}
	e := &encoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}

// putEncoder keeps e for another answer; the ResponseWriter has copied
// what it wrote.
func putEncoder(e *encoder) {
	if e.buf.Cap() > maxPooledAnswer {
		return
	}
	e.buf.Reset()
	encoders.Put(e)
}

// fail sends an ErrorResponse.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, typ, msg string) {
	level := slog.LevelDebug
	if status >= 500 {
		level = slog.LevelWarn
	}
	h.log.Log(r.Context(), level, "http api error",
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Int("status", status), slog.String("type", typ), slog.String("message", msg))
	h.write(w, r, status, ErrorResponse{Error: ErrorDetail{Type: typ, Message: msg}})
}
