package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Timeouts of the diagnostic tools.
const (
	// EchoTimeout is echo's per-attempt timeout.
	EchoTimeout = 5 * time.Second
	// SleepTimeout is sleep's per-attempt timeout: longer than the longest
	// sleep the schema allows (10 minutes), so only a shorter Timeout set by
	// the caller makes a sleep time out.
	SleepTimeout = 11 * time.Minute
	// FlakyTimeout is flaky's per-attempt timeout: how long an attempt with
	// "fail": "timeout" hangs before the worker's timeout ends it.
	FlakyTimeout = 5 * time.Second
)

// sleepMaxMS is the longest sleep, in milliseconds, sleep's schema allows.
const sleepMaxMS = 600_000

// The failures flaky can simulate.
const (
	failTimeout = "timeout" // hang until the attempt's timeout fires
	fail429     = "429"     // HTTP 429 Too Many Requests, with Retry-After when retry_after_s > 0
	fail503     = "503"     // HTTP 503 Service Unavailable
	fail404     = "404"     // HTTP 404 Not Found (permanent: not retried)
	failConnect = "connect" // connection refused
	failPanic   = "panic"   // the handler panics
	// failCrash kills the worker process (exit status CrashExitCode) before
	// the attempt can report, to test poison-call handling. Only a tool
	// made with Options.AllowCrash does it (cmd/worker's); elsewhere it is
	// a permanent error, so an orchestrator running in-process workers
	// cannot be taken down by a call.
	failCrash = "crash"
)

// CrashExitCode is the exit status of a worker process that flaky crashed.
const CrashExitCode = 3

// Options adjust the diagnostic tools.
type Options struct {
	// AllowCrash lets flaky's "crash" failure end the whole process. Set
	// it only in a process that is nothing but a worker (cmd/worker).
	AllowCrash bool
}

// Register adds echo, sleep and flaky to r; flaky refuses to crash.
func Register(r *tools.Registry) error { return RegisterWith(r, Options{}) }

// RegisterWith adds echo, sleep and flaky, adjusted by opts, to r.
func RegisterWith(r *tools.Registry, opts Options) error {
	flaky := Flaky()
	if opts.AllowCrash {
		flaky = FlakyCrashing()
	}
	for _, t := range []tools.Tool{Echo(), Sleep(), flaky} {
		if err := r.Register(t); err != nil {
			return err
		}
	}
	return nil
}

// Echo returns the echo tool: {"text": string} comes back as the result.
func Echo() tools.Tool {
	return tools.Tool{
		Name: "echo",
		Description: "Returns the given text unchanged. A diagnostic tool: use it to check " +
			"that tool calls reach a worker and their results come back.",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"text": {"type": "string", "description": "The text to return."}
			},
			"required": ["text"],
			"additionalProperties": false
		}`),
		Timeout:    EchoTimeout,
		Idempotent: true,
		Handler:    echo,
	}
}

func echo(_ context.Context, input json.RawMessage) (tools.Output, error) {
	if text, ok := echoText(input); ok {
		return tools.Text(text), nil
	}
	var in struct {
		Text string `json:"text"`
	}
	if err := decode(input, &in); err != nil {
		return tools.Output{}, err
	}
	return tools.Text(in.Text), nil
}

// Sleep returns the sleep tool: {"ms": 0..600000} waits that long and
// answers "slept N ms". It stops when the call's context ends, with an error
// that classifies as a timeout when the tool's timeout fired.
func Sleep() tools.Tool {
	return tools.Tool{
		Name: "sleep",
		Description: "Waits the given number of milliseconds, then answers \"slept N ms\". " +
			"A diagnostic tool: use it to test timeouts and slow calls.",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"ms": {
					"type": "integer",
					"minimum": 0,
					"maximum": ` + strconv.Itoa(sleepMaxMS) + `,
					"description": "How long to wait, in milliseconds (at most 600000, ten minutes)."
				}
			},
			"required": ["ms"],
			"additionalProperties": false
		}`),
		Timeout:    SleepTimeout,
		Idempotent: true,
		Handler:    sleep,
	}
}

func sleep(ctx context.Context, input json.RawMessage) (tools.Output, error) {
	var in struct {
		MS int64 `json:"ms"`
	}
	if err := decode(input, &in); err != nil {
		return tools.Output{}, err
	}
	start := time.Now()
	t := time.NewTimer(time.Duration(in.MS) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return tools.Text(fmt.Sprintf("slept %d ms", in.MS)), nil
	case <-ctx.Done():
		return tools.Output{}, fmt.Errorf("sleep of %d ms stopped after %d ms: %w",
			in.MS, time.Since(start).Milliseconds(), ctx.Err())
	}
}

// Flaky returns the flaky tool. It fails the first "times" attempts of a
// call (default 1) with the failure named by "fail", then answers
// "ok after N attempts". It keeps no state: the attempt number comes from
// tools.CallInfoFrom(ctx).Attempt, which the worker sets from JetStream's
// delivery count, so the attempts of one call may run on different workers.
//
// The failures: "timeout" blocks until the attempt's context ends and
// returns its error (the worker's per-attempt timeout, FlakyTimeout by
// default, makes it a timeout); "429", "503" and "404" return a
// *classify.HTTPError with that status ("429" carries Retry-After:
// retry_after_s when that is > 0); "connect" returns a connection-refused
// *net.OpError; "panic" panics, for testing the worker's recovery;
// "crash" is a permanent error here (see FlakyCrashing).
func Flaky() tools.Tool { return flakyTool(false) }

// FlakyCrashing is Flaky whose "crash" failure exits the process with
// CrashExitCode at once, without answering: a diagnostic for poison calls,
// for a process that runs nothing but a worker.
func FlakyCrashing() tools.Tool { return flakyTool(true) }

func flakyTool(allowCrash bool) tools.Tool {
	return tools.Tool{
		Name: "flaky",
		Description: "Fails the first `times` attempts of a call with the chosen error, then answers " +
			"\"ok after N attempts\". A diagnostic tool for testing retries: " +
			"\"timeout\", \"429\", \"503\" and \"connect\" are retried, \"404\" is not.",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"fail": {
					"type": "string",
					"enum": ["timeout", "429", "503", "404", "connect", "panic", "crash"],
					"description": "The failure to simulate: hang until the timeout, HTTP 429, 503 or 404, a refused connection, a panic, or a crash of the worker process (separate worker processes only)."
				},
				"times": {
					"type": "integer",
					"minimum": 0,
					"default": 1,
					"description": "How many attempts fail before one succeeds."
				},
				"retry_after_s": {
					"type": "integer",
					"minimum": 0,
					"default": 0,
					"description": "For 429: the Retry-After header in seconds; 0 sends none."
				}
			},
			"required": ["fail"],
			"additionalProperties": false
		}`),
		Timeout:    FlakyTimeout,
		Idempotent: true,
		Handler: func(ctx context.Context, input json.RawMessage) (tools.Output, error) {
			return flaky(ctx, input, allowCrash)
		},
	}
}

func flaky(ctx context.Context, input json.RawMessage, allowCrash bool) (tools.Output, error) {
	var in struct {
		Fail        string `json:"fail"`
		Times       *int   `json:"times"`
		RetryAfterS int    `json:"retry_after_s"`
	}
	if err := decode(input, &in); err != nil {
		return tools.Output{}, err
	}
	times := 1
	if in.Times != nil {
		times = *in.Times
	}
	attempt := 1
	if ci, ok := tools.CallInfoFrom(ctx); ok && ci.Attempt > 0 {
		attempt = ci.Attempt
	}
	if attempt > times {
		return tools.Text(okAfter(attempt)), nil
	}
	switch in.Fail {
	case failTimeout:
		<-ctx.Done()
		return tools.Output{}, fmt.Errorf("flaky: attempt %d hung until it was stopped: %w", attempt, ctx.Err())
	case fail429:
		h := http.Header{}
		if in.RetryAfterS > 0 {
			h.Set("Retry-After", strconv.Itoa(in.RetryAfterS))
		}
		return tools.Output{}, &classify.HTTPError{StatusCode: http.StatusTooManyRequests, Header: h}
	case fail503:
		return tools.Output{}, &classify.HTTPError{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}}
	case fail404:
		return tools.Output{}, &classify.HTTPError{StatusCode: http.StatusNotFound, Header: http.Header{}}
	case failConnect:
		return tools.Output{}, connectionRefused()
	case failPanic:
		panic(fmt.Sprintf("flaky: simulated panic on attempt %d", attempt))
	case failCrash:
		if !allowCrash {
			return tools.Output{}, classify.Invalid("fail",
				`"crash" works only on a worker running as its own process (cmd/worker); this worker refuses to crash`)
		}
		fmt.Fprintf(os.Stderr, "flaky: crashing this worker process on purpose (attempt %d, \"fail\": \"crash\")\n", attempt)
		os.Exit(CrashExitCode)
		return tools.Output{}, nil
	default:
		return tools.Output{}, classify.Invalid("fail", fmt.Sprintf("must be one of %q, %q, %q, %q, %q, %q, %q",
			failTimeout, fail429, fail503, fail404, failConnect, failPanic, failCrash))
	}
}

func okAfter(n int) string {
	if n == 1 {
		return "ok after 1 attempt"
	}
	return fmt.Sprintf("ok after %d attempts", n)
}

// connectionRefused is the error a TCP dial to a closed port returns,
// built without dialing.
func connectionRefused() error {
	return &net.OpError{
		Op:   "dial",
		Net:  "tcp",
		Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9},
		Err:  os.NewSyscallError("connect", syscall.ECONNREFUSED),
	}
}

// decode reads the (already validated) input; an error here means the
// handler was called without validation.
func decode(input json.RawMessage, v any) error {
	if err := json.Unmarshal(input, v); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || len(input) == 0 {
			return classify.Invalid("", "is not valid JSON")
		}
		return classify.Invalid("", "does not match the tool's schema")
	}
	return nil
}

// echoText reads the text of echo's input when the input is {"text": S}
// and nothing else (what echo's schema lets through), S a JSON string
// without escapes or control characters, in valid UTF-8: the text is S's
// bytes, one allocation instead of encoding/json's reflection. ok is false
// for any other input, which decode then reads (and refuses where it
// should).
func echoText(input []byte) (string, bool) {
	i := skipSpace(input, 0)
	if i >= len(input) || input[i] != '{' {
		return "", false
	}
	i = skipSpace(input, i+1)
	const key = `"text"`
	if !bytes.HasPrefix(input[i:], []byte(key)) {
		return "", false
	}
	i = skipSpace(input, i+len(key))
	if i >= len(input) || input[i] != ':' {
		return "", false
	}
	i = skipSpace(input, i+1)
	if i >= len(input) || input[i] != '"' {
		return "", false
	}
	start := i + 1
	n := bytes.IndexByte(input[start:], '"')
	if n < 0 {
		return "", false
	}
	text := input[start : start+n]
	for _, c := range text {
		if c < 0x20 || c == '\\' {
			return "", false // escapes (the quote found may be escaped) and control characters: encoding/json's
		}
	}
	if !utf8.Valid(text) {
		return "", false
	}
	if i = skipSpace(input, start+n+1); i >= len(input) || input[i] != '}' || skipSpace(input, i+1) != len(input) {
		return "", false
	}
	return string(text), true
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
