// Package classify is toolpool's error taxonomy: it decides what a tool
// error means (Classify), what the model is told about it (Decision.Message),
// and what happens to the call next (Policy.Decide).
//
// # Taxonomy
//
// Classify looks at an error with errors.Is and errors.As only, never at its
// text. The first match in this order wins:
//
//	what the error chain holds                          class       code                  retried
//	--------------------------------------------------  ----------  --------------------  -------
//	Transient(err), RetryAfter(err, d)                  transient   err's code, or        yes
//	                                                                "transient"
//	Permanent(err)                                      permanent   err's code, or        no
//	                                                                "permanent"
//	*ValidationError, Invalid(field, reason)            validation  invalid_argument      no
//	*UnknownToolError                                   validation  unknown_tool          no
//	*PanicError                                         internal    panic                 no
//	*HTTPError 429                                      transient   http_429              yes, honouring Retry-After
//	*HTTPError 408, 425, 5xx                            transient   http_<status>         yes, honouring Retry-After
//	*HTTPError other 4xx (400, 401, 403, 404, …), 3xx   permanent   http_<status>         no
//	*HTTPError 1xx, 2xx, out of range (a tool bug)      internal    http_<status>         no
//	context.DeadlineExceeded, *TimeoutError,            transient   timeout               yes
//	os.ErrDeadlineExceeded, a net.Error that Timeout()
//	context.Canceled (the worker was stopping)          transient   canceled              yes
//	ECONNREFUSED                                        transient   connection_refused    yes
//	ECONNRESET, ECONNABORTED, EPIPE                     transient   connection_reset      yes
//	ENETUNREACH, EHOSTUNREACH, EHOSTDOWN, ENETDOWN      transient   network               yes
//	*net.DNSError "no such host"                        permanent   dns_not_found         no
//	*net.DNSError, other (temporary failure)            transient   dns_temporary         yes
//	fs.ErrNotExist (ENOENT)                             permanent   not_found             no
//	fs.ErrPermission (EACCES, EPERM)                    permanent   permission_denied     no
//	io.ErrUnexpectedEOF                                 transient   connection_reset      yes
//	TLS certificate errors (x509, tls)                  permanent   tls                   no
//	another *net.OpError, net.ErrClosed                 transient   network               yes
//	*url.Error around io.EOF (closed mid-request)       transient   connection_reset      yes
//	anything else                                       internal    internal              no
//
// Two codes never come from a tool's error: the pool writes them itself,
// deadline_exceeded (transient, not retried) for a call whose overall
// deadline passed, and poison (internal) for a call that stopped every
// worker that ran it.
//
// A marker forces its class but keeps the code of what it wraps:
// Permanent(context.DeadlineExceeded) is permanent with code "timeout". The
// outermost marker wins. Every wrapper keeps the wrapped error reachable with
// errors.Is and errors.As.
//
// # Marking errors in a tool
//
// A tool returns errors as it likes; Classify recognises the standard library's
// network, file and context errors by itself. Mark what it cannot know:
//
//	resp, err := client.Do(req)
//	if err != nil {
//		return tools.Output{}, err // refused, reset, timeout, DNS: classified
//	}
//	defer resp.Body.Close()
//	if resp.StatusCode >= 300 {
//		return tools.Output{}, classify.NewHTTPError(resp) // status and Retry-After
//	}
//	if quotaExceeded {
//		return tools.Output{}, classify.RetryAfter(errQuota, time.Minute)
//	}
//	if archived {
//		return tools.Output{}, classify.Permanent(classify.WithMessage(errArchived,
//			"the repository is archived and cannot be changed"))
//	}
//	if in.Limit > 50 {
//		return tools.Output{}, classify.Invalid("limit", "must be <= 50")
//	}
//
// # What the model reads
//
// Decision.Cause and Decision.Hint are written for the model and derived from
// the class and code, never from err.Error(): no Go type names, stack traces,
// credentials or host names reach it. The exceptions are the bad fields of a
// validation error, which come from the schema validator, and a message
// attached with WithMessage, which the tool author wrote for the model.
// Decision.Message puts them into the content of an is_error result:
//
//	The tool search_web did not answer within 10s (3 attempts). Retries ran
//	out, so the call was set aside (dead-lettered). Do not call it again right
//	away; try a different approach, such as another tool, or answer from what
//	you know.
//
// Every other sentence toolpool writes for a model is here too, one function
// per situation, each for the is_error result of one code: the dispatcher's
// advice after repeated failures (RepeatedFailureMessage), a tool no worker
// serves (NoWorkerMessage, CodeNoWorker), a call with no result in time
// (NoResultMessage), a saturated pool (SaturatedMessage), the calls the
// dispatcher or the HTTP API refuse before publishing them
// (MissingIDMessage, RefusedFieldMessage, NotPreparedMessage,
// UnsupportedCallTypeMessage, InvalidArgumentsMessage), a poison call
// (PoisonMessage), a call that expired in the queue (ExpiredMessage) and a
// call whose outcome is unknown (OutcomeUnknownMessage). Each says what went
// wrong and what to try next. Durations in all of them, and in
// Decision.Message, are written by FormatDuration; a wait that a Retry-After
// header also carries is rounded by RetryAfterSeconds, so the two agree.
//
// # Retries
//
// A Policy (defaults: 3 attempts, 1s base delay, 30s max delay, ±25% jitter)
// gives the delay before the next attempt: min(base·2^(n-1), max) with
// jitter, raised to a Retry-After and capped at max. Policy.Decide is the one
// place a call's fate is decided after a delivery: reply, retry after a
// delay, dead-letter with a reason, hand back, or terminate a malformed
// message. Its Verdict names the fate with a Fate, the one vocabulary of
// worker outcomes, metric labels and dead-letter reasons; settle.Settle carries
// it out.
package classify
