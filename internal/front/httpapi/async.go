package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/tasks"
	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Async calls: POST /v1/tool_calls with Prefer: respond-async (RFC 7240)
// records the turn as a durable task (package tasks) and answers 202 at
// once; GET /v1/tool_calls/{id} answers it from any replica, DELETE
// cancels it.

// TaskStore keeps the async calls: *tasks.Store.
type TaskStore interface {
	Start(ctx context.Context, req tasks.Request) (tasks.Task, error)
	Get(ctx context.Context, tenant, id string) (tasks.Task, error)
	Wait(ctx context.Context, tenant, id string, d time.Duration) (tasks.Task, error)
	Cancel(ctx context.Context, tenant, id string) (tasks.Task, error)
}

// Headers of async calls (RFC 7240).
const (
	// HeaderPrefer carries respond-async (and optionally wait=<seconds>)
	// on a POST /v1/tool_calls that wants to be answered at once.
	HeaderPrefer = "Prefer"
	// HeaderPreferenceApplied says respond-async was honoured (on the 202).
	HeaderPreferenceApplied = "Preference-Applied"
)

// MaxAsyncWait caps GET /v1/tool_calls/{id}?wait= and the Prefer header's
// wait: a long poll answers 202 after at most this long.
const MaxAsyncWait = 60 * time.Second

// FrontHTTP is the tasks.Request.Front of the HTTP API's async calls.
const FrontHTTP = "http"

// ErrorCancelled is the error type of GET /v1/tool_calls/{id} for an
// async call that was cancelled (409).
const ErrorCancelled = "cancelled"

// AsyncCall is the body of a 202 (an async call accepted, or still
// working) and of the answer to DELETE /v1/tool_calls/{id}. The results
// themselves come with GET, in the request's format, once Status is
// "completed".
type AsyncCall struct {
	// ID names the call: GET or DELETE /v1/tool_calls/{id}.
	ID string `json:"id"`
	// Status is working, completed, failed or cancelled.
	Status string `json:"status"`
	// CreatedAt is when it was accepted.
	CreatedAt time.Time `json:"created_at"`
	// Error says why it failed or was cancelled.
	Error string `json:"error,omitempty"`
}

// asyncPayload is what the HTTP API keeps in a task (tasks.Request.Payload)
// to answer it in the request's format: the turn's calls as the answer
// names them, the ones answered here, and where the dispatched ones go.
type asyncPayload struct {
	Format Format          `json:"format"`
	Calls  []asyncCallName `json:"calls"`
	Local  []asyncLocal    `json:"local,omitempty"`
	At     []int           `json:"at"` // the position in Calls of each of tasks.Request.Calls
}

// asyncCallName is one call of the turn as its answer names it.
type asyncCallName struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	WireID     string `json:"wire_id,omitempty"`
	OutputType string `json:"output_type,omitempty"`
}

// asyncLocal is a call answered by the HTTP API itself.
type asyncLocal struct {
	At     int             `json:"at"`
	Result envelope.Result `json:"result"`
}

// prefersAsync reports whether the request's Prefer headers ask for
// respond-async, and the wait=<seconds> preference (0 when absent or not
// a number of seconds).
func prefersAsync(h http.Header) (async bool, wait time.Duration) {
	for _, v := range h.Values(HeaderPrefer) {
		for pref := range strings.SplitSeq(v, ",") {
			token, _, _ := strings.Cut(pref, ";") // parameters of a preference are ignored
			name, value, _ := strings.Cut(token, "=")
			name, value = strings.TrimSpace(name), strings.Trim(strings.TrimSpace(value), `"`)
			switch {
			case strings.EqualFold(name, "respond-async"):
				async = true
			case strings.EqualFold(name, "wait"):
				if n, err := strconv.ParseUint(value, 10, 32); err == nil {
					wait = min(time.Duration(n)*time.Second, MaxAsyncWait)
				}
			}
		}
	}
	return async, wait
}

// async serves a POST /v1/tool_calls that prefers respond-async, when the
// Handler has a TaskStore; false leaves the request to the synchronous
// path (no store, no preference, or nothing to dispatch: every call was
// answered here). ctx carries the request's scheduling (withScheduling).
func (h *Handler) async(ctx context.Context, w http.ResponseWriter, r *http.Request, req toolCallsRequest, key *apikey.Key, traceparent string) bool {
	if h.cfg.Tasks == nil {
		return false
	}
	want, wait := prefersAsync(r.Header)
	if !want {
		return false
	}
	tenant, keyName := "", ""
	if key != nil {
		tenant, keyName = key.Tenant, key.Name
	}
	results, send, at, err := h.split(ctx, req.turn, key)
	if err != nil {
		setRetryAfter(w, h.cfg.RetryAfter)
		h.fail(w, r, http.StatusServiceUnavailable, ErrorUnavailable, "the tools this API key may call cannot be listed right now; retry after the Retry-After delay")
		return true
	}
	if len(send) == 0 {
		return false // nothing runs: the answer is ready now
	}
	payload, err := json.Marshal(newAsyncPayload(req.turn, results, at))
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, ErrorInternal, "the request could not be recorded")
		return true
	}
	task, err := h.cfg.Tasks.Start(ctx, tasks.Request{
		Tenant: tenant, Session: req.session, Calls: send,
		Weight: dispatch.WeightFrom(ctx), Priority: dispatch.PriorityFrom(ctx), Traceparent: traceparent,
		Timeout: req.timeout, Front: FrontHTTP, Payload: payload,
		KeyName: keyName, NoCache: noCache(r.Header),
	})
	if err != nil {
		h.asyncRefused(w, r, req.turn, results, at, tenant, err)
		return true
	}
	h.cfg.Metrics.ToolCalls(tenant, OutcomeDispatched, len(send))
	if wait = min(wait, req.timeout); wait > 0 { // Prefer: wait=N: the answer itself when it comes in time
		if done, err := h.cfg.Tasks.Wait(r.Context(), tenant, task.ID, wait); err == nil && done.State.Final() {
			h.answerTask(w, r, done)
			return true
		}
	}
	w.Header().Set(HeaderPreferenceApplied, "respond-async")
	w.Header().Set(envelope.HeaderTraceparent, traceparent)
	h.accepted(w, r, task)
	return true
}

// split is run without the Dispatch: the results of the calls answered
// here (unparseable arguments, tools the key may not use), and the calls
// to dispatch with their positions in t.
func (h *Handler) split(ctx context.Context, t *turn, key *apikey.Key) (results []envelope.Result, send []envelope.ToolUseBlock, at []int, err error) {
	results = make([]envelope.Result, len(t.calls))
	var allowed []string
	restricted := key != nil && key.Tools != nil
	if restricted {
		defs, err := h.cfg.Definitions.Definitions(ctx)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: %w", errCannotList, err)
		}
		for _, d := range defs {
			if key.Allows(d.Name) {
				allowed = append(allowed, d.Name)
			}
		}
	}
	for i, c := range t.calls {
		switch {
		case t.local[i] != nil:
			results[i] = *t.local[i]
		case restricted && !slices.Contains(allowed, c.Name):
			results[i] = *notAllowedResult(c.ID, c.Name, allowed)
			h.cfg.Metrics.ToolCalls(key.Tenant, OutcomeNotAllowed, 1)
		default:
			send = append(send, c)
			at = append(at, i)
		}
	}
	return results, send, at, nil
}

// newAsyncPayload is what a task keeps of t: results holds the answers of
// the calls not at a position of at.
func newAsyncPayload(t *turn, results []envelope.Result, at []int) asyncPayload {
	p := asyncPayload{Format: t.shape.format(), Calls: make([]asyncCallName, len(t.calls)), At: at}
	for i, c := range t.calls {
		p.Calls[i] = asyncCallName{ID: c.ID, Name: c.Name, WireID: t.wire[i].id, OutputType: t.wire[i].outputType}
	}
	j := 0
	for i := range t.calls {
		if j < len(at) && at[j] == i {
			j++
			continue
		}
		p.Local = append(p.Local, asyncLocal{At: i, Result: results[i]})
	}
	return p
}

// asyncRefused answers a POST whose task could not be started: 429 as a
// synchronous call would get it (every dispatched call answered with the
// saturation's words, or with the budgets' when every call was over
// one), 413 for a turn over the record limit, 503 else.
func (h *Handler) asyncRefused(w http.ResponseWriter, r *http.Request, t *turn, results []envelope.Result, at []int, tenant string, err error) {
	if saturated, ok := errors.AsType[*dispatch.SaturatedError](err); ok {
		for _, i := range at {
			results[i] = dispatch.SaturatedResult(t.calls[i].ID, t.calls[i].Name, saturated)
		}
		h.cfg.Metrics.ToolCalls(tenant, OutcomeSaturated, len(at))
		setRetryAfter(w, saturated.RetryAfter)
		w.Header().Set(HeaderFormat, string(t.shape.format()))
		h.write(w, r, http.StatusTooManyRequests, t.shape.answer(t, results))
		return
	}
	if over, ok := errors.AsType[*policy.ExhaustedError](err); ok && len(over.Results) == len(at) {
		// Every call over a budget: refused at POST as a synchronous
		// call is, with the gate's results; nothing is kept.
		for j, i := range at {
			results[i] = over.Results[j]
		}
		h.cfg.Metrics.ToolCalls(tenant, OutcomeOverBudget, len(at))
		setRetryAfter(w, over.RetryAfter)
		w.Header().Set(HeaderFormat, string(t.shape.format()))
		h.write(w, r, http.StatusTooManyRequests, t.shape.answer(t, results))
		return
	}
	switch {
	case errors.Is(err, tasks.ErrTooLarge):
		h.fail(w, r, http.StatusRequestEntityTooLarge, ErrorTooLarge,
			"the calls are too large to keep for an async call ("+err.Error()+"); send fewer or smaller calls per request, or post them without Prefer: respond-async")
	case errors.Is(err, tasks.ErrInvalid):
		h.fail(w, r, http.StatusBadRequest, ErrorInvalidRequest, err.Error())
	case r.Context().Err() != nil:
		h.fail(w, r, StatusClientClosed, ErrorClientClosed, "the client went away before the async call was recorded")
	default:
		h.log.WarnContext(r.Context(), "starting an async call failed", slog.Any("error", err))
		setRetryAfter(w, h.cfg.RetryAfter)
		h.fail(w, r, http.StatusServiceUnavailable, ErrorUnavailable,
			"the async call could not be recorded: the tool pool's message server is unreachable or this replica is stopping; retry after the Retry-After delay")
	}
}

// accepted answers 202 for a working task: where to poll, and when.
func (h *Handler) accepted(w http.ResponseWriter, r *http.Request, t tasks.Task) {
	w.Header().Set("Location", PathToolCalls+"/"+t.ID)
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(t.PollInterval.Seconds())))))
	h.write(w, r, http.StatusAccepted, asyncCall(t))
}

// asyncCall is the AsyncCall of t.
func asyncCall(t tasks.Task) AsyncCall {
	return AsyncCall{ID: t.ID, Status: string(t.State), CreatedAt: t.Created, Error: t.Error}
}

// taskRoute serves /v1/tool_calls/{id}: GET (or HEAD) answers the async
// call, DELETE cancels it.
func (h *Handler) taskRoute(w http.ResponseWriter, r *http.Request, id string) {
	if h.cfg.Tasks == nil {
		h.fail(w, r, http.StatusNotFound, ErrorNotFound, "async calls are not served here")
		return
	}
	tenant := ""
	if k, ok := apikey.FromContext(r.Context()); ok {
		tenant = k.Tenant
	}
	var t tasks.Task
	var err error
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		wait, werr := parseWait(r.URL.Query().Get("wait"))
		if werr != nil {
			h.fail(w, r, http.StatusBadRequest, ErrorInvalidRequest, werr.Error())
			return
		}
		if wait > 0 { // a long poll: no read deadline may cut it, the write gets its own
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Time{})
			_ = rc.SetWriteDeadline(time.Now().Add(wait + h.cfg.WriteTimeout))
		}
		t, err = h.cfg.Tasks.Wait(r.Context(), tenant, id, wait)
	case http.MethodDelete:
		if t, err = h.cfg.Tasks.Get(r.Context(), tenant, id); err == nil && t.Request.Front == FrontHTTP {
			t, err = h.cfg.Tasks.Cancel(r.Context(), tenant, id)
		}
	default:
		w.Header().Set("Allow", "GET, HEAD, DELETE")
		h.fail(w, r, http.StatusMethodNotAllowed, ErrorMethodNotAllowed,
			fmt.Sprintf("%s %s/{id} is not served; GET the async call, or DELETE it to cancel", r.Method, PathToolCalls))
		return
	}
	if err == nil && t.Request.Front != FrontHTTP {
		err = tasks.ErrNotFound // an MCP task is not an async HTTP call
	}
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		h.fail(w, r, http.StatusNotFound, ErrorNotFound,
			"no async call "+strconv.Quote(clip(id, 64))+" for this API key; an async call's results are kept for a limited time after it ended")
		return
	case err != nil && r.Context().Err() != nil:
		h.fail(w, r, StatusClientClosed, ErrorClientClosed, "the client went away")
		return
	case err != nil:
		h.log.WarnContext(r.Context(), "reading an async call failed", slog.Any("error", err))
		setRetryAfter(w, h.cfg.RetryAfter)
		h.fail(w, r, http.StatusServiceUnavailable, ErrorUnavailable, "the async call cannot be read right now; retry after the Retry-After delay")
		return
	}
	if r.Method == http.MethodDelete {
		h.write(w, r, http.StatusOK, asyncCall(t))
		return
	}
	h.answerTask(w, r, t)
}

// clip is s, cut to at most n bytes.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// parseWait reads the wait parameter: a Go duration ("30s") or a number
// of seconds ("30"), 0 to MaxAsyncWait (a longer one is MaxAsyncWait).
func parseWait(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
			return 0, fmt.Errorf("wait %q: want a duration such as 30s, or a number of seconds, at most %s", clip(s, 64), classify.FormatDuration(MaxAsyncWait))
		}
		d = time.Duration(min(secs, MaxAsyncWait.Seconds()) * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("wait %q: must not be negative", clip(s, 64))
	}
	return min(d, MaxAsyncWait), nil
}

// answerTask answers GET /v1/tool_calls/{id}: 202 while working, the
// whole answer in the request's format when completed, 409 when
// cancelled, 503 when it failed (its words say what to do).
func (h *Handler) answerTask(w http.ResponseWriter, r *http.Request, t tasks.Task) {
	switch t.State {
	case tasks.StateWorking:
		h.accepted(w, r, t)
		return
	case tasks.StateCancelled:
		h.fail(w, r, http.StatusConflict, ErrorCancelled, "the async call was cancelled ("+t.Error+"); post the calls again to run them")
		return
	case tasks.StateFailed:
		setRetryAfter(w, h.cfg.RetryAfter)
		h.fail(w, r, http.StatusServiceUnavailable, ErrorUnavailable, "the async call failed: "+t.Error)
		return
	}
	tu, results, err := rebuild(t)
	if err != nil {
		h.log.WarnContext(r.Context(), "an async call's record cannot be answered", slog.String("id", t.ID), slog.Any("error", err))
		h.fail(w, r, http.StatusInternalServerError, ErrorInternal, "the async call's record cannot be answered")
		return
	}
	if tp := t.Request.Traceparent; tp != "" {
		w.Header().Set(envelope.HeaderTraceparent, tp)
	}
	w.Header().Set(HeaderFormat, string(tu.shape.format()))
	if idx := errorIndexes(results); idx != "" {
		w.Header().Set(HeaderErrorIndexes, idx)
	}
	h.write(w, r, http.StatusOK, tu.shape.answer(tu, results))
}

// rebuild is the turn a completed task answers, from its payload, and
// the results of all its calls in order.
func rebuild(t tasks.Task) (*turn, []envelope.Result, error) {
	var p asyncPayload
	if err := json.Unmarshal(t.Request.Payload, &p); err != nil {
		return nil, nil, err
	}
	s, err := shapeNamed(string(p.Format))
	if err != nil || s == nil {
		return nil, nil, fmt.Errorf("format %q", p.Format)
	}
	if len(p.At) != len(t.Results) {
		return nil, nil, fmt.Errorf("%d results for %d calls", len(t.Results), len(p.At))
	}
	tu := newTurn(s, len(p.Calls))
	for _, c := range p.Calls {
		tu.add(envelope.ToolUseBlock{Type: "tool_use", ID: c.ID, Name: c.Name}, nil, wireCall{id: c.WireID, outputType: c.OutputType})
	}
	results := make([]envelope.Result, len(p.Calls))
	for _, l := range p.Local {
		if l.At < 0 || l.At >= len(results) {
			return nil, nil, fmt.Errorf("a local result at %d of %d", l.At, len(results))
		}
		results[l.At] = l.Result
	}
	for j, i := range p.At {
		if i < 0 || i >= len(results) {
			return nil, nil, fmt.Errorf("a result at %d of %d", i, len(results))
		}
		results[i] = t.Results[j]
	}
	return tu, results, nil
}
