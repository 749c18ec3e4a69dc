package classify

import (
	"strconv"
	"sync"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// entry is what a code means: its natural class and the model-facing cause and
// hint. Causes start in lower case and have no final period: Message puts
// them after "The tool X failed: ".
type entry struct {
	class     envelope.Class
	retryable bool
	cause     string
	hint      string
}

const (
	hintTransient  = "Try again later, use a different tool, or answer from what you know."
	hintPermanent  = "Retrying the same call will not help; change the input or try a different approach."
	hintValidation = "Fix the input and call the tool again."
	hintInternal   = "This was not caused by your input; try a different approach or answer from what you know."
	// hintDifferentApproach is what a model is told after a call that ran
	// out of attempts or time: not to loop on the same call.
	hintDifferentApproach = "Do not call it again right away; try a different approach, such as another tool, or answer from what you know."
	// hintPoison is what a model is told of a call that stopped its workers.
	hintPoison = "Do not call it again with the same input; try a different approach or answer from what you know."
	// hintNoTools ends a message that would list the available tools when
	// there are none.
	hintNoTools = "No tools are available right now."
)

func transientEntry(cause, hint string) entry {
	return entry{class: envelope.ClassTransient, retryable: true, cause: cause, hint: hint}
}

func permanentEntry(cause, hint string) entry {
	return entry{class: envelope.ClassPermanent, cause: cause, hint: hint}
}

// codes holds every code except the HTTP ones, which httpTable holds.
var codes = map[string]entry{
	CodeTimeout: transientEntry("it did not answer in time",
		"Try a different tool or answer from what you know."),
	CodeCanceled: transientEntry("the call was interrupted because the worker running it was stopping",
		"Call the tool again."),
	CodeConnRefused: transientEntry("its service refused the connection", hintTransient),
	CodeConnReset:   transientEntry("the connection to its service broke off", hintTransient),
	CodeNetwork:     transientEntry("its service could not be reached over the network", hintTransient),
	CodeDNSTemporary: transientEntry("the address of its service could not be looked up right now",
		hintTransient),
	CodeUnavailable: transientEntry("its service is unavailable", hintTransient),
	CodeTransient:   transientEntry("it hit a temporary error", hintTransient),

	CodeDNSNotFound: permanentEntry("the address of its service does not exist",
		"Check the address if it came from your input; otherwise use a different tool or source."),
	CodeTLS: permanentEntry("a secure connection to its service could not be established (certificate problem)",
		"Retrying will not help; use a different tool or source."),
	CodeNotFound: permanentEntry("the file was not found",
		"Check the path, for example by listing the directory, and call the tool again with the right one."),
	CodePermission: permanentEntry("permission was denied",
		"Use a path or resource the tool is allowed to access, or a different approach."),
	CodePermanent: permanentEntry("it hit an error that retrying will not fix", hintPermanent),

	CodeInvalidArgument: {class: envelope.ClassValidation,
		cause: "the input does not match the tool's schema",
		hint:  "Fix these fields and call the tool again."},
	CodeUnknownTool: {class: envelope.ClassValidation,
		cause: "there is no such tool",
		hint:  "Call one of the available tools."},

	// Transient in nature, but there is nothing left to retry.
	CodeDeadline: {class: envelope.ClassTransient,
		cause: "the call's deadline passed before it could finish",
		hint:  "There is no time left for this call: answer from what you have, or try a quicker approach."},

	CodePanic: {class: envelope.ClassInternal,
		cause: "it crashed with an internal error", hint: hintInternal},
	CodePoison: {class: envelope.ClassInternal,
		cause: "the worker running it stopped each time, before it could answer",
		hint:  hintPoison},
	CodeInternal: {class: envelope.ClassInternal,
		cause: "it hit an internal error", hint: hintInternal},
}

// fromCode is the Decision a code gives on its own.
func fromCode(code string) Decision {
	e, ok := codes[code]
	if !ok {
		e, code = codes[CodeInternal], CodeInternal
	}
	return Decision{Class: e.class, Code: code, Retryable: e.retryable, Cause: e.cause, Hint: e.hint}
}

// classHint is the hint for a class when the code's own hint does not fit.
func classHint(c envelope.Class) string {
	switch c {
	case envelope.ClassTransient:
		return hintTransient
	case envelope.ClassPermanent:
		return hintPermanent
	case envelope.ClassValidation:
		return hintValidation
	default:
		return hintInternal
	}
}

// httpEntry is the meaning of one HTTP status.
type httpEntry struct {
	code string
	entry
}

const (
	minStatus = 100
	maxStatus = 599

	hintHTTPInput = "Check the arguments you passed and call the tool again with corrected values."
	hintHTTPAuth  = "Retrying will not help: the tool is not allowed to access this. Use a different tool or source."
	hintHTTPGone  = "Check the address or identifier you passed; the resource may not exist."
)

// httpTable is built on first use: the code, class, cause and hint of every
// status from 100 to 599, so that Classify does not format strings.
var httpTable = sync.OnceValue(func() *[maxStatus + 1]httpEntry {
	var t [maxStatus + 1]httpEntry
	for s := minStatus; s <= maxStatus; s++ {
		t[s] = newHTTPEntry(s)
	}
	return &t
})

// httpSpecific holds the statuses with their own cause and hint.
var httpSpecific = map[int]entry{
	400: permanentEntry("its service rejected the request as malformed", hintHTTPInput),
	401: permanentEntry("its service did not accept the tool's credentials", hintHTTPAuth),
	403: permanentEntry("its service refused access", hintHTTPAuth),
	404: permanentEntry("its service found nothing at the requested address", hintHTTPGone),
	405: permanentEntry("its service does not allow this kind of request", hintPermanent),
	408: transientEntry("its service timed out waiting for the request", hintTransient),
	409: permanentEntry("the request conflicts with the current state of the resource", hintHTTPInput),
	410: permanentEntry("the requested resource is gone for good", hintHTTPGone),
	413: permanentEntry("the request is too large for its service", "Send less data, for example in smaller parts."),
	422: permanentEntry("its service could not process the request's content", hintHTTPInput),
	425: transientEntry("its service is not ready to process the request yet", hintTransient),
	429: transientEntry("its service is rate limiting requests", "Wait before calling it again, or use a different tool."),
	500: transientEntry("its service had an internal error", hintTransient),
	502: transientEntry("a gateway in front of its service got no valid answer", hintTransient),
	503: transientEntry("its service is unavailable", hintTransient),
	504: transientEntry("a gateway in front of its service timed out", hintTransient),
}

func newHTTPEntry(status int) httpEntry {
	n := strconv.Itoa(status)
	tag := " (HTTP " + n + ")"
	code := "http_" + n
	if status == 429 {
		code = CodeHTTP429
	}
	e, ok := httpSpecific[status]
	switch {
	case ok:
	case status >= 500 && status <= maxStatus:
		e = transientEntry("its service failed", hintTransient)
	case status >= 400 && status < 500:
		e = permanentEntry("its service rejected the request", hintPermanent)
	case status >= 300 && status < 400:
		e = permanentEntry("its service redirected the request elsewhere", hintPermanent)
	default:
		e = entry{class: envelope.ClassInternal, cause: "its service gave an answer the tool did not expect", hint: hintInternal}
	}
	e.cause += tag
	return httpEntry{code: code, entry: e}
}

// httpDecision is the Decision for an HTTP status, without Retry-After.
func httpDecision(status int) Decision {
	var e httpEntry
	if status >= minStatus && status <= maxStatus {
		e = httpTable()[status]
	} else {
		e = newHTTPEntry(status)
	}
	return Decision{Class: e.class, Code: e.code, Retryable: e.retryable, Cause: e.cause, Hint: e.hint}
}
