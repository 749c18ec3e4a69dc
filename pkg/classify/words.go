package classify

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The sentences of this file are every text a model reads that toolpool
// writes itself, besides Decision.Message: the dispatcher's, the HTTP API's,
// the poison watcher's and the worker's own answers. Each is for the
// is_error result of one code (named in its doc comment), says what went
// wrong and what to try next, and never shows internals (subjects, stream
// names, Go errors). Durations in them are written by FormatDuration.

// FormatDuration writes d the way every sentence for the model does, as a
// person would: "250ms", "1.5s", "30s", "2m", "1m30s", "1h", "1h30m". Below
// 10s it keeps tenths of a second; above, whole seconds. d <= 0 is "0s".
func FormatDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if r := d.Round(time.Millisecond); r < time.Second {
		return r.String()
	}
	if r := d.Round(100 * time.Millisecond); r < 10*time.Second {
		return r.String()
	}
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2] // "2m0s" is "2m"
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2] // "1h0m0s" is "1h"
	}
	return s
}

// RetryAfterSeconds is d in whole seconds, rounded up and at least 1: what a
// Retry-After header carries, and so what a sentence that names the same
// wait says (SaturatedMessage).
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// RepeatedFailureMessage is the sentence added to the content of an is_error
// result when tool has failed failures times in a row in one agent session
// (the dispatcher's advice against retry loops).
func RepeatedFailureMessage(tool string, failures int) string {
	return "The tool " + tool + " has now failed " + strconv.Itoa(failures) +
		" times in a row in this session: stop retrying it and use a different approach."
}

// NoWorkerMessage is the content of the is_error result (CodeNoWorker) of a
// call to tool when no live worker serves it; available are the tools served
// now.
func NoWorkerMessage(tool string, available []string) string {
	msg := "No worker serves the tool " + tool + " right now, so the call was not run. " +
		"It may be back soon: try again later, or use a different approach."
	names := slices.Compact(slices.Sorted(slices.Values(available)))
	if len(names) == 0 {
		return msg + " " + hintNoTools
	}
	return msg + " Tools available now: " + strings.Join(names, ", ") + "."
}

// NoResultMessage is the content of the is_error result (CodeDeadline) of a
// call to tool that returned no result within waited: the orchestrator
// stopped waiting for it.
func NoResultMessage(tool string, waited time.Duration) string {
	return "The tool " + tool + " returned no result within " + FormatDuration(waited) +
		"; it may still be running. Try again later or use a different approach."
}

// Saturation describes a call the orchestrator refused because the tool pool
// is saturated: the input of SaturatedMessage.
type Saturation struct {
	// Tool is the tool the model called.
	Tool string
	// Busy is the tool whose queue is too long; "" when the pool as a whole
	// has too many calls in flight.
	Busy string
	// Wait is the estimated queued work of Busy, Left the time the call had
	// left before its deadline. Wait > 0 says the call was refused because it
	// could not start before its deadline.
	Wait, Left time.Duration
	// RetryAfter is when to try again (rounded as RetryAfterSeconds does).
	RetryAfter time.Duration
}

// SaturatedMessage is the content of the is_error result (CodeTransient,
// with a RetryAfter) of a call of a turn refused because the pool is
// saturated.
func SaturatedMessage(s Saturation) string {
	again := FormatDuration(time.Duration(RetryAfterSeconds(s.RetryAfter)) * time.Second)
	if s.Wait > 0 {
		return "The call to " + s.Tool + " was not run: the tool pool is saturated: " + s.Busy +
			" is busy, with about " + FormatDuration(s.Wait) + " of queued work, more than this call's timeout (" +
			FormatDuration(s.Left) + "). Try the call again in " + again + ", or use another approach."
	}
	why := "the tool pool has too many calls in flight"
	if s.Busy != "" {
		why = "too many calls are waiting for " + s.Busy
	}
	return "The call to " + s.Tool + " was not run: the tool pool is saturated (" + why +
		"). Try the call again in " + again + ", or answer from what you know."
}

// MissingIDMessage is the content of the is_error result
// (CodeInvalidArgument) of a tool_use block without an id.
func MissingIDMessage(tool string) string {
	return "The call to " + tool + " has no tool_use id, so it was not run: every tool_use block needs a unique id."
}

// RefusedFieldMessage is the content of the is_error result
// (CodeInvalidArgument) of a call whose field, as the call envelope names it,
// cannot be sent: reason says why, e.g. "is 300 bytes; the limit is 256".
// Only the fields the model writes ("id", "tool") are named; any other
// gives NotPreparedMessage, since the model can neither see nor fix it.
func RefusedFieldMessage(tool, field, reason string) string {
	if field != "id" && field != "tool" {
		return NotPreparedMessage(tool)
	}
	return "The call to " + tool + " was not run: its " + field + " " + reason +
		". Call the tool again with a valid " + field + "."
}

// NotPreparedMessage is the content of the is_error result (CodeInternal) of
// a call the orchestrator could not prepare for another reason.
func NotPreparedMessage(tool string) string {
	return "The call to " + tool + " could not be prepared and was not run. " + hintInternal
}

// UnsupportedCallTypeMessage is the content of the is_error result
// (CodeInvalidArgument) of an OpenAI tool call of type typ, which the pool
// does not run.
func UnsupportedCallTypeMessage(typ string) string {
	return "This tool call is of type " + strconv.Quote(typ) +
		", which this tool pool does not run: it runs function tools only. Call one of the function tools instead."
}

// InvalidArgumentsMessage is the content of the is_error result
// (CodeInvalidArgument) of a call to tool whose arguments are not JSON;
// problem says where the JSON breaks.
func InvalidArgumentsMessage(tool, problem string) string {
	return "The arguments of this call to " + tool + " are not valid JSON (" + problem + "), so it was not run. Call " +
		tool + " again with arguments that are one JSON object."
}

// ArgumentsNotObjectMessage is the text of the error an MCP client gets
// (JSON-RPC invalid params) for a call to tool whose arguments are valid
// JSON but not an object; kind names what they are ("an array").
func ArgumentsNotObjectMessage(tool, kind string) string {
	return "The arguments of this call to " + tool + " are " + kind + ", not a JSON object, so it was not run. Call " +
		tool + " again with arguments that are one JSON object."
}

// PoolUnavailableMessage is the content of the error an MCP client gets
// for a call to tool the pool could not take (its message server
// unreachable, or not storing calls in time): nothing was run.
func PoolUnavailableMessage(tool string) string {
	return "The tool pool could not take this call to " + tool + " right now, so it was not run. " +
		"Call it again in a moment, or answer from what you know."
}

// ShuttingDownMessage is the content of the error an MCP client gets for
// a call to tool that arrived while the server was shutting down: nothing
// was run.
func ShuttingDownMessage(tool string) string {
	return "The tool pool is restarting, so this call to " + tool + " was not run. Call it again in a moment."
}

// PoisonMessage is the content of the is_error result (CodePoison) of a call
// whose every one of deliveries deliveries stopped the worker running it, so
// it was dead-lettered.
func PoisonMessage(tool string, deliveries int) string {
	return "The tool " + tool + " stopped the worker running it on each of " + strconv.Itoa(deliveries) +
		" attempts, before it could answer, so the call was set aside. " + hintPoison
}

// ExpiredMessage is the content of the is_error result (CodeDeadline) of a
// call whose deadline passed while it waited queued for queued, before any
// worker started it, so it was dead-lettered unrun.
func ExpiredMessage(tool string, queued time.Duration) string {
	return "The call to " + tool + " waited " + FormatDuration(queued) +
		" in the queue and its deadline passed before any worker could start it, so it was not run. " +
		"The tool is busy; try again later or use a different approach."
}

// OutcomeUnknownMessage is the content of the is_error result
// (CodeOutcomeUnknown) of a call of a tool that is not idempotent whose
// earlier attempt started and never reported.
func OutcomeUnknownMessage(tool string) string {
	return "The outcome of this call to " + tool + " is unknown: the worker running it stopped before it reported " +
		"whether the call took effect, and " + tool + " is not safe to run twice, so it was not run again. " +
		"Before calling it again, check whether its effect happened (for example, read back what it was meant to " +
		"change or create); call it again only if it did not."
}

// The causes of an MCP server's failures (package mcpback), for
// WithMessage: Decision.Message completes "The tool X failed: " with one.
const (
	// MCPCauseNotRunning: no session to the server is up; transient.
	MCPCauseNotRunning = "its MCP server is not running right now (it is being restarted)"
	// MCPCauseConnectionLost: the session ended during the call; transient.
	MCPCauseConnectionLost = "the connection to its MCP server was lost during the call"
	// MCPCauseProtocolError: a JSON-RPC error instead of a result; transient.
	MCPCauseProtocolError = "its MCP server answered with a protocol error"
	// MCPCauseToolGone: the server stopped listing the tool; permanent.
	MCPCauseToolGone = "its MCP server no longer offers it"
	// MCPCauseNoText: an isError result without text; permanent. (With
	// text, the server's own text is the cause.)
	MCPCauseNoText = "its MCP server reported an error without saying what went wrong"
)

// Codes of the is_error result of a call that waited at the orchestrator's
// scheduler until its deadline (HeldMessage); all are transient.
const (
	// CodeFairShare: the tool was busy with other callers' calls.
	CodeFairShare = "fair_share_wait"
	// CodeKeyConcurrency: the caller's key had its concurrency cap of
	// calls of the tool in flight.
	CodeKeyConcurrency = "key_concurrency_limit"
	// CodeKeyRate: the caller's key had used its rate of calls of the
	// tool.
	CodeKeyRate = "key_rate_limit"
)

// HeldReason says why a call waited at the scheduler.
type HeldReason uint8

// The reasons of Held.
const (
	// HeldBusy: the tool's workers were busy and its free slots went to
	// other callers' calls in turn (fair share).
	HeldBusy HeldReason = iota
	// HeldConcurrency: the caller's key had Held.Concurrency calls of the
	// tool in flight.
	HeldConcurrency
	// HeldRate: the caller's key had started Held.Rate calls per Held.Per.
	HeldRate
)

// Held describes a call the orchestrator held for its turn until its
// deadline: the input of HeldMessage.
type Held struct {
	Tool   string     // the tool called
	Reason HeldReason // which limit held it
	// Key names what the limit applies to, as the model knows it: "your
	// session", "your account", "calls with this repo" ("" is "this caller").
	Key string
	// Concurrency, Rate and Per are the per-key limits of the tool
	// (fleet-wide).
	Concurrency int           // calls in flight at once; 0: no limit
	Rate        float64       // calls started per Per; 0: no limit
	Per         time.Duration // the period of Rate
	// Waited is how long the call waited; RetryAfter when a new call
	// would likely pass (rounded as RetryAfterSeconds does).
	Waited, RetryAfter time.Duration
}

// Code is the result code of the held call.
func (h Held) Code() string {
	switch h.Reason {
	case HeldConcurrency:
		return CodeKeyConcurrency
	case HeldRate:
		return CodeKeyRate
	}
	return CodeFairShare
}

// HeldMessage is the content of the is_error result (Held.Code, transient,
// with a RetryAfter) of a call that waited at the orchestrator until its
// deadline without its turn to run: over its key's concurrency cap or
// rate limit, or behind other callers' calls of a busy tool.
func HeldMessage(h Held) string {
	again := FormatDuration(time.Duration(RetryAfterSeconds(h.RetryAfter)) * time.Second)
	who := cmpOr(h.Key, "this caller")
	switch h.Reason {
	case HeldConcurrency:
		return "The call to " + h.Tool + " was not run: " + who + " may have at most " + calls(float64(h.Concurrency)) +
			" to " + h.Tool + " running at once (a concurrency limit), and it had that many for the " +
			FormatDuration(h.Waited) + " the call waited. The limit is temporary: try the call again in " + again +
			", or make fewer calls to " + h.Tool + " at once."
	case HeldRate:
		return "The call to " + h.Tool + " was not run: " + who + " may start at most " +
			calls(h.Rate) + " to " + h.Tool + " " + perText(h.Per) + " (a rate limit), and had used them up for the " + FormatDuration(h.Waited) +
			" the call waited. The limit is temporary: try the call again in " + again + ", or make fewer calls to " + h.Tool + "."
	}
	return "The call to " + h.Tool + " was not run: every slot of the tool was busy with other calls (its slots are shared fairly between callers) for the " +
		FormatDuration(h.Waited) + " it waited for its turn. This is temporary: try the call again in " + again +
		", or use a different approach."
}

// perText is a rate's period: "per second", "per minute", "per 5s".
func perText(per time.Duration) string {
	switch per {
	case 0, time.Second:
		return "per second"
	case time.Minute:
		return "per minute"
	case time.Hour:
		return "per hour"
	}
	return "per " + FormatDuration(per)
}

// calls is "1 call", "8 calls", "0.5 calls".
func calls(n float64) string {
	if n == 1 {
		return "1 call"
	}
	return strconv.FormatFloat(n, 'f', -1, 64) + " calls"
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
