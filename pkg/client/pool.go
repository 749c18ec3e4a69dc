package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// ErrUnavailable is matched (errors.Is) by the errors of calls the pool
// could not take: a 503 answer, or an orchestrator that cannot be reached.
// It is the dispatcher's own (dispatch.ErrUnavailable), so one check
// covers Pool and Local.
var ErrUnavailable = pooltype.ErrUnavailable

// ErrSaturated is matched (errors.Is) by the error of a turn the pool
// refused because it is saturated (HTTP 429; with Local, admission
// control): nothing of it ran, and the same turn may be sent again after
// the error's RetryAfter. Such errors match ErrUnavailable too. It is
// the dispatcher's own (dispatch.ErrSaturated).
var ErrSaturated = pooltype.ErrSaturated

// WithTraceparent returns ctx carrying a W3C traceparent ("00-<32 hex trace
// id>-<16 hex parent id>-<2 hex flags>"): Pool sends it with the calls, a
// Local's dispatcher puts it on them, so that the calls join the caller's
// trace. An invalid value is ignored.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	return pooltype.WithTraceparent(ctx, traceparent)
}

// EnvAPIKey is the environment variable New reads the API key from when
// no WithAPIKey option is given.
const EnvAPIKey = "TOOLPOOL_API_KEY"

// maxAnswerBytes caps an answer read from the API (results are capped at
// 256 KiB of text each by the workers; non-text blocks are not).
const maxAnswerBytes = 256 << 20

// Pool calls the tools of a toolpool through an orchestrator's HTTP API.
// Create it with New. It is safe for concurrent use.
type Pool struct {
	base    string // scheme://host[/prefix], no trailing slash
	hc      *http.Client
	timeout time.Duration
	header  http.Header
	apiKey  string // sent as Authorization: Bearer
}

// Option configures a Pool.
type Option func(*Pool) error

// WithHTTPClient sets the HTTP client. Default: a client without a
// timeout of its own (a turn may take minutes; the ctx bounds it).
func WithHTTPClient(hc *http.Client) Option {
	return func(p *Pool) error {
		if hc == nil {
			return errors.New("client: WithHTTPClient: nil client")
		}
		p.hc = hc
		return nil
	}
}

// WithTimeout sets how long the pool is asked to wait for a turn's results
// (the timeout query parameter). Default: most of the time left before the
// ctx deadline, else the server's default (one minute).
func WithTimeout(d time.Duration) Option {
	return func(p *Pool) error {
		if d <= 0 {
			return fmt.Errorf("client: WithTimeout: must be positive, got %v", d)
		}
		p.timeout = d
		return nil
	}
}

// WithAPIKey sets the API key sent with every request
// (Authorization: Bearer <key>), as the orchestrator's --api-keys file or
// TOOLPOOL_API_KEYS names it. Default: the environment variable
// TOOLPOOL_API_KEY; an empty key sends none.
func WithAPIKey(key string) Option {
	return func(p *Pool) error {
		if strings.ContainsAny(key, " \t\r\n") {
			return errors.New("client: WithAPIKey: the key must not contain spaces")
		}
		p.apiKey = key
		return nil
	}
}

// WithHeader adds a header to every request, e.g. the credentials of a
// proxy in front of the orchestrator.
func WithHeader(key, value string) Option {
	return func(p *Pool) error {
		if key == "" {
			return errors.New("client: WithHeader: empty key")
		}
		p.header.Add(key, value)
		return nil
	}
}

// New returns a Pool for the orchestrator at baseURL, e.g.
// "http://127.0.0.1:8080".
func New(baseURL string, opts ...Option) (*Pool, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want http://host:port or https://host:port", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: base URL %q: must not have a query or fragment", baseURL)
	}
	p := &Pool{base: strings.TrimRight(u.String(), "/"), hc: &http.Client{}, header: http.Header{},
		apiKey: strings.TrimSpace(os.Getenv(EnvAPIKey))}
	for _, o := range opts {
		if err := o(p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// APIError is an answer of the API other than 200. It matches
// ErrUnavailable when the status is 503 or 429, and ErrSaturated when it
// is 429 (Type "saturated"; Message is what the model would read).
type APIError struct {
	// StatusCode is the answer's HTTP status.
	StatusCode int
	// Type says what kind of error: "invalid_request", "unauthorized", …
	// (docs/http-api.md), "saturated" for a 429.
	Type string
	// Message says what to change (for a 429, what the model would read).
	Message string
	// RetryAfter is the Retry-After of a 503 or 429; zero when absent.
	RetryAfter time.Duration
}

// Error reads like "toolpool: 400 invalid_request: the body is empty".
func (e *APIError) Error() string {
	return "toolpool: " + strconv.Itoa(e.StatusCode) + " " + e.Type + ": " + e.Message
}

// Unwrap returns ErrUnavailable for a 503, and ErrSaturated and
// ErrUnavailable for a 429.
func (e *APIError) Unwrap() []error {
	switch e.StatusCode {
	case http.StatusServiceUnavailable:
		return []error{ErrUnavailable}
	case http.StatusTooManyRequests:
		return []error{ErrSaturated, ErrUnavailable}
	}
	return nil
}

// Dispatch runs the tool_use blocks of one assistant turn through the pool,
// in parallel, and returns one tool_result param per block, in order. A
// session ("" for none) scopes the advice the pool adds when one tool keeps
// failing. A traceparent put in ctx with WithTraceparent is sent along.
// Errors: an *APIError, or a transport error wrapping ErrUnavailable;
// failed tool calls are not errors but results with IsError set.
func (p *Pool) Dispatch(ctx context.Context, session string, uses []anthropic.ToolUseBlock) ([]anthropic.ToolResultBlockParam, error) {
	if len(uses) == 0 {
		return nil, nil
	}
	blocks, err := p.DispatchBlocks(ctx, session, ToolUses(uses))
	if err != nil {
		return nil, err
	}
	return ToolResults(blocks), nil
}

// DispatchBlocks is Dispatch with the envelope's blocks, for agents that do
// not use anthropic-sdk-go.
func (p *Pool) DispatchBlocks(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.ToolResultBlock, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	body, err := encodeCalls(calls)
	if err != nil {
		return nil, fmt.Errorf("client: encode the tool calls: %w", err)
	}
	target := p.base + pathToolCalls
	if t := p.waitFor(ctx); t > 0 {
		target += "?timeout=" + url.QueryEscape(t.String())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set(headerSession, session)
	}
	if tp, ok := pooltype.TraceparentFrom(ctx); ok {
		req.Header.Set(envelope.HeaderTraceparent, tp)
	}
	var content []envelope.ToolResultBlock
	err = p.do(req, func(data []byte) (err error) {
		content, err = decodeAnswer(data)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(content) != len(calls) {
		return nil, fmt.Errorf("client: the pool answered %d results for %d calls", len(content), len(calls))
	}
	for i := range calls {
		if content[i].ToolUseID != calls[i].ID {
			return nil, fmt.Errorf("client: result %d is for call %q, want %q", i, content[i].ToolUseID, calls[i].ID)
		}
	}
	return content, nil
}

// waitFor is the timeout to ask the pool for: the configured one, else
// most of what is left before the ctx deadline, so the answer arrives
// before the ctx ends; 0 leaves it to the server.
func (p *Pool) waitFor(ctx context.Context) time.Duration {
	if p.timeout > 0 {
		return p.timeout
	}
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	left := time.Until(dl)
	left -= min(time.Second, left/10)
	return max(left.Truncate(time.Millisecond), time.Millisecond)
}

// Definitions returns the tool definitions the pool serves (GET /v1/tools).
// With it a Pool is a DefinitionSource.
func (p *Pool) Definitions(ctx context.Context) ([]tools.Definition, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+pathTools, nil)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	var tr toolsResponse
	if err := p.do(req, func(data []byte) error { return json.Unmarshal(data, &tr) }); err != nil {
		return nil, err
	}
	return tr.Tools, nil
}

// Tools returns the tools the pool serves as SDK params, for
// MessageNewParams.Tools.
func (p *Pool) Tools(ctx context.Context) ([]anthropic.ToolUnionParam, error) {
	defs, err := p.Definitions(ctx)
	if err != nil {
		return nil, err
	}
	return ToolParams(defs)
}

// do sends req and decodes a 200 answer with decode.
func (p *Pool) do(req *http.Request, decode func(data []byte) error) error {
	for k, vs := range p.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if p.apiKey != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+p.apiKey)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return fmt.Errorf("client: %s %s: %w", req.Method, req.URL.Path, ctxErr)
		}
		return fmt.Errorf("client: %s %s: %w: %w", req.Method, req.URL.Path, ErrUnavailable, err)
	}
	defer resp.Body.Close()
	data, err := readAnswer(resp)
	if err != nil {
		return fmt.Errorf("client: %s %s: reading the answer: %w: %w", req.Method, req.URL.Path, ErrUnavailable, err)
	}
	if resp.StatusCode != http.StatusOK {
		return apiError(resp, data)
	}
	if err := decode(data); err != nil {
		return fmt.Errorf("client: %s %s: the answer is not what the API sends: %w", req.Method, req.URL.Path, err)
	}
	return nil
}

func apiError(resp *http.Response, data []byte) error {
	e := &APIError{StatusCode: resp.StatusCode}
	var er errorResponse
	var saturated userMessage
	switch {
	case json.Unmarshal(data, &er) == nil && er.Error.Type != "":
		e.Type, e.Message = er.Error.Type, er.Error.Message
	case resp.StatusCode == http.StatusTooManyRequests && json.Unmarshal(data, &saturated) == nil && len(saturated.Content) > 0:
		// The body is the turn's answer, every call an is_error for the model.
		e.Type, e.Message = "saturated", saturated.Content[0].Content.Text()
	default:
		e.Type = "http_" + strconv.Itoa(resp.StatusCode)
		e.Message = strings.TrimSpace(string(data[:min(len(data), 200)]))
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// Dispatcher runs the tool calls of one assistant turn in this process and
// returns one result per call, in the calls' order: a
// *toolpool.Orchestrator, or the dispatcher inside one.
type Dispatcher interface {
	Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error)
}

// DefinitionSource lists the tools a pool serves right now: a Pool, or
// the definitions of a registry in this process.
type DefinitionSource interface {
	Definitions(ctx context.Context) ([]tools.Definition, error)
}

// Local is the in-process counterpart of Pool: the same methods, over a
// Dispatcher in this process and a DefinitionSource. An agent written
// against Pool runs unchanged on either.
type Local struct {
	d    Dispatcher
	defs DefinitionSource
}

// NewLocal returns a Local over d and defs.
func NewLocal(d Dispatcher, defs DefinitionSource) *Local {
	return &Local{d: d, defs: defs}
}

// Dispatch runs the tool_use blocks of one turn through d and returns one
// tool_result param per block, in order. Errors are d's (errors.Is
// ErrUnavailable when the pool cannot take calls).
func (l *Local) Dispatch(ctx context.Context, session string, uses []anthropic.ToolUseBlock) ([]anthropic.ToolResultBlockParam, error) {
	if len(uses) == 0 {
		return nil, nil
	}
	calls := ToolUses(uses)
	results, err := l.d.Dispatch(ctx, session, calls)
	if err != nil {
		return nil, err
	}
	if len(results) != len(calls) {
		return nil, fmt.Errorf("client: the dispatcher returned %d results for %d calls", len(results), len(calls))
	}
	out := make([]anthropic.ToolResultBlockParam, len(results))
	for i := range results {
		b := results[i].ToolResult()
		b.ToolUseID = calls[i].ID
		out[i] = ToolResult(b)
	}
	return out, nil
}

// Tools returns the tools of the definition source as SDK params.
func (l *Local) Tools(ctx context.Context) ([]anthropic.ToolUnionParam, error) {
	defs, err := l.defs.Definitions(ctx)
	if err != nil {
		return nil, err
	}
	return ToolParams(defs)
}
