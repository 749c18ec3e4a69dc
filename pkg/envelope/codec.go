package envelope

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
	"github.com/toolpool/toolpool/internal/infra/subject"
)

// Limits bounds what the codec accepts and emits. A zero or negative field
// means its default.
type Limits struct {
	// MaxInputBytes caps a call's input JSON. Default MaxInputBytesDefault.
	MaxInputBytes int
	// MaxContentBytes caps a result's text content; longer content is cut by
	// Truncate. Default MaxContentBytesDefault.
	MaxContentBytes int
}

// DefaultLimits are the limits used when none are given.
var DefaultLimits = Limits{MaxInputBytes: MaxInputBytesDefault, MaxContentBytes: MaxContentBytesDefault}

// WithDefaults returns l with every zero or negative field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxInputBytes <= 0 {
		l.MaxInputBytes = MaxInputBytesDefault
	}
	if l.MaxContentBytes <= 0 {
		l.MaxContentBytes = MaxContentBytesDefault
	}
	return l
}

// Envelope overheads: how much a call message may exceed its input limit,
// and the sanity cap on a whole result message.
const (
	// CallOverheadBytes is what a call message may carry besides its input:
	// DecodeCall refuses a message longer than MaxInputBytes+CallOverheadBytes
	// before parsing it.
	CallOverheadBytes = 64 << 10
	// MaxResultBytes is the largest result message DecodeResult parses. It is
	// far above the text cap because non-text blocks (images, documents) are
	// not cut.
	MaxResultBytes = 64 << 20
)

// The sentinels a *DecodeError wraps; match them with errors.Is.
var (
	// ErrMalformed: the message is not JSON, or a field is missing, has the
	// wrong type or an invalid value.
	ErrMalformed = errors.New("envelope: malformed")
	// ErrVersion: the "v" field is missing or names a version this package
	// does not read.
	ErrVersion = errors.New("envelope: unsupported version")
	// ErrTooLarge: the message, or a call's input, is over its size limit.
	ErrTooLarge = errors.New("envelope: too large")
)

// DecodeError says which field of an envelope is wrong and why. Encoders
// return it too, for a call or result the decoder would refuse, so that such
// a message is never published.
type DecodeError struct {
	Field  string // JSON field name, "" for the whole message
	Reason string
	Err    error // sentinel: ErrMalformed, ErrVersion, ErrTooLarge
}

// Error reads like `envelope: field "input": must be a JSON object`.
func (e *DecodeError) Error() string {
	if e.Field == "" {
		return "envelope: " + e.Reason
	}
	return "envelope: field " + strconv.Quote(e.Field) + ": " + e.Reason
}

// Unwrap returns the sentinel, so errors.Is(err, ErrTooLarge) works.
func (e *DecodeError) Unwrap() error { return e.Err }

func malformed(field, reason string) *DecodeError {
	return &DecodeError{Field: field, Reason: reason, Err: ErrMalformed}
}

// syntaxError describes why data is not valid JSON. Only called on the error
// path: it parses data a second time to find the offending byte.
func syntaxError(field string, data []byte) *DecodeError {
	var v json.RawMessage
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	switch {
	case len(trimSpace(data)) == 0:
		return malformed(field, "empty; expected a JSON object")
	case errors.As(err, &se):
		return malformed(field, "not valid JSON: "+se.Error()+" (at byte "+strconv.FormatInt(se.Offset, 10)+")")
	default:
		return malformed(field, "not valid JSON")
	}
}

// ValidToolName reports whether name is a valid tool name:
// ^[a-zA-Z0-9_-]{1,64}$, the rule of the Anthropic API. It is the rule of
// every token the pool builds into a subject (subject.ValidToken), and the
// one check of a tool name: the registry, the catalog and the codec use it.
func ValidToolName(name string) bool { return subject.ValidToken(name) }

// quoteShort quotes user data for an error message, cut to a sane length.
func quoteShort(s string) string {
	const max = 40
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

// quoteRaw is quoteShort for a raw JSON value, without copying all of it.
func quoteRaw(b []byte) string {
	return quoteShort(string(b[:min(len(b), 64)]))
}

// MaxIDBytes caps a call's id (and original_id). The id goes into the
// Nats-Msg-Id header and, base64-encoded, into the key of its attempt record
// (a KV subject), which must stay far below the server's 4,096-byte
// control-line limit. Model tool_use ids are a few dozen bytes.
const MaxIDBytes = 512

const toolNameRule = "must be " + subject.TokenChars

// Validate checks c as DecodeCall would after parsing: id and tool present,
// a valid tool name, input a JSON object of at most lim.MaxInputBytes, no
// control characters in the string fields, reply_to one subject token
// (subject.ValidToken: at most 64 letters, digits, '_' or '-'). The
// error is a *DecodeError. The orchestrator can call it before publishing.
func (c *Call) Validate(lim Limits) error {
	if c == nil {
		return malformed("", "no call")
	}
	lim = lim.WithDefaults()
	if err := c.validateFields(); err != nil {
		return err
	}
	return checkInput(c.Input, lim.MaxInputBytes)
}

// validateFields checks everything but the input.
func (c *Call) validateFields() *DecodeError {
	if strings.TrimSpace(c.ID) == "" {
		return malformed("id", "missing; it must be the tool_use id")
	}
	if strings.TrimSpace(c.Tool) == "" {
		return malformed("tool", "missing; it must name the tool to run")
	}
	if !ValidToolName(c.Tool) {
		return malformed("tool", toolNameRule+", got "+quoteShort(c.Tool))
	}
	if c.Key != "" && !ValidKey(c.Key) {
		return malformed("key", "must be a call key: "+formatCount(KeyLen)+" characters of a-z and 2-7, got "+quoteShort(c.Key))
	}
	for _, f := range [...]struct{ name, v string }{{"id", c.ID}, {"original_id", c.OriginalID}} {
		if len(f.v) > MaxIDBytes {
			return malformed(f.name, "is "+formatCount(len(f.v))+" bytes; the limit is "+formatCount(MaxIDBytes))
		}
	}
	for _, f := range [...]struct{ name, v string }{
		{"id", c.ID}, {"tenant", c.Tenant}, {"session", c.Session}, {"reply_to", c.ReplyTo},
		{"traceparent", c.Traceparent}, {"original_id", c.OriginalID},
	} {
		if jsonwire.HasControl(f.v) {
			return malformed(f.name, "must not contain control characters")
		}
	}
	if c.ReplyTo != "" && !subject.ValidToken(c.ReplyTo) {
		// Workers publish the result on tools.result.<reply_to>: a long or
		// dotted one would address another subject or close their connection.
		return malformed("reply_to", "the orchestrator instance "+subject.TokenRule+", got "+quoteShort(c.ReplyTo)+" ("+strconv.Itoa(len(c.ReplyTo))+" bytes)")
	}
	return nil
}

// checkInput checks that input is one JSON object of at most max bytes
// (max <= 0: no size limit).
func checkInput(input json.RawMessage, max int) error {
	in := trimSpace(input)
	if len(in) == 0 {
		return malformed("input", "missing; it must be a JSON object")
	}
	if max > 0 && len(in) > max {
		return &DecodeError{Field: "input", Reason: "is " + formatCount(len(in)) + " bytes; the limit is " + formatCount(max), Err: ErrTooLarge}
	}
	if in[0] != '{' {
		r := reader{data: in}
		return malformed("input", "must be a JSON object, not "+r.kind(span{0, len(in)}))
	}
	if !jsonwire.Valid(in) {
		return syntaxError("input", in)
	}
	return nil
}

// Call fields, as indexes into a span table.
const (
	callV = iota
	callID
	callTool
	callInput
	callSession
	callReplyTo
	callCreatedAt
	callDeadline
	callTraceparent
	callOriginalID
	callKey
	callTenant
	numCallFields
)

var callFieldNames = [numCallFields]string{"v", "id", "tool", "input", "session", "reply_to", "created_at", "deadline", "traceparent", "original_id", "key", "tenant"}

func callField(key []byte) int {
	switch string(key) {
	case "v":
		return callV
	case "id":
		return callID
	case "tool":
		return callTool
	case "input":
		return callInput
	case "session":
		return callSession
	case "reply_to":
		return callReplyTo
	case "created_at":
		return callCreatedAt
	case "deadline":
		return callDeadline
	case "traceparent":
		return callTraceparent
	case "original_id":
		return callOriginalID
	case "key":
		return callKey
	case "tenant":
		return callTenant
	}
	return -1
}

// DecodeCall strictly decodes a call envelope. Errors are *DecodeError
// wrapping ErrMalformed, ErrVersion or ErrTooLarge.
//
// It refuses: a message over lim.MaxInputBytes+CallOverheadBytes (before
// parsing); anything but one JSON object, including trailing data; a missing
// "v" or one other than Version; a field given twice; a missing or blank id or
// tool; a tool name not matching ^[a-zA-Z0-9_-]{1,64}$; input that is missing,
// not a JSON object, or over lim.MaxInputBytes; a field of the wrong JSON type;
// times that are not RFC 3339; control characters in string fields; a reply_to
// that cannot be part of a NATS subject; a key that is not of the form of a
// call key (see ValidKey), or that is not the key of the call's content
// (Call.CallKey): a call must not take another call's identity, or its
// result would be stored under that call's key and delivered to it. Keys
// match exactly (case matters).
//
// A call without a key (written by an older release, e.g. in a dead
// letter) gets the key its content gives (Call.CallKey).
//
// Members it does not know are accepted and ignored, so that a later v1 writer
// may add optional fields without breaking older readers. null counts as the
// member's zero value.
//
// The returned Call does not alias data; see DecodeCallShared for one whose
// input does.
func DecodeCall(data []byte, lim Limits) (*Call, error) {
	return decodeCall(data, lim, false)
}

// DecodeCallShared is DecodeCall, except that the returned Call's Input is
// a slice of data instead of a copy (its capacity ends with it, so appending
// to it cannot write into the rest of data). It saves copying the input for
// a caller that owns data and leaves it unchanged while the Call is in use:
// a received nats.Msg's Data, which nats.go allocates for each message, is
// such a buffer. The string fields never alias data.
func DecodeCallShared(data []byte, lim Limits) (*Call, error) {
	return decodeCall(data, lim, true)
}

// callStrings are the string fields of a call, in the order their errors
// are reported.
var callStrings = [...]int{callID, callTool, callKey, callTenant, callSession, callReplyTo, callTraceparent, callOriginalID}

func decodeCall(data []byte, lim Limits, share bool) (*Call, error) {
	lim = lim.WithDefaults()
	if maxMsg := lim.MaxInputBytes + CallOverheadBytes; maxMsg > 0 && len(data) > maxMsg { // maxMsg <= 0: overflow, no cap
		return nil, &DecodeError{Reason: "message is " + formatCount(len(data)) + " bytes; the limit is " + formatCount(maxMsg), Err: ErrTooLarge}
	}
	var spans [numCallFields]span
	dup, err := scanEnvelope(data, callField, spans[:])
	if err != nil {
		return nil, err
	}
	r := reader{data: data}
	if err := r.version(spans[callV]); err != nil {
		return nil, err
	}
	if dup >= 0 {
		return nil, malformed(callFieldNames[dup], "appears more than once")
	}
	size := 0
	for _, f := range callStrings {
		if s := spans[f]; s.present() && !r.isString(s) && !r.isNull(s) {
			return nil, malformed(callFieldNames[f], "must be a string, not "+r.kind(s))
		}
		size += r.stringSize(spans[f])
	}
	r.arena.Grow(size)
	c := &Call{V: Version}
	for f, p := range []*string{callID: &c.ID, callTool: &c.Tool, callKey: &c.Key, callTenant: &c.Tenant, callSession: &c.Session, callReplyTo: &c.ReplyTo, callTraceparent: &c.Traceparent, callOriginalID: &c.OriginalID} {
		if p != nil && spans[f].present() {
			*p, _ = r.string(spans[f]) // checked above
		}
	}
	for f, p := range []*time.Time{callCreatedAt: &c.CreatedAt, callDeadline: &c.Deadline} {
		if p == nil || !spans[f].present() {
			continue
		}
		t, err := parseTime(r.raw(spans[f]))
		if err != nil {
			return nil, malformed(callFieldNames[f], "must be an RFC 3339 time string such as \"2025-01-02T15:04:05Z\"")
		}
		*p = t
	}
	if err := c.validateFields(); err != nil {
		return nil, err
	}
	in := spans[callInput]
	if !in.present() || r.isNull(in) {
		return nil, malformed("input", "missing; it must be a JSON object")
	}
	if r.data[in.start] != '{' {
		return nil, malformed("input", "must be a JSON object, not "+r.kind(in))
	}
	if n := in.end - in.start; n > lim.MaxInputBytes {
		return nil, &DecodeError{Field: "input", Reason: "is " + formatCount(n) + " bytes; the limit is " + formatCount(lim.MaxInputBytes), Err: ErrTooLarge}
	}
	if share {
		c.Input = json.RawMessage(data[in.start:in.end:in.end])
	} else {
		c.Input = json.RawMessage(append([]byte(nil), r.raw(in)...))
	}
	if c.Key == "" {
		// Written before calls had keys (a dead letter of an older
		// release): its key is what its writer would have sent.
		c.Key = c.CallKey()
	} else if !c.keyMatches() {
		return nil, errKeyMismatch()
	}
	return c, nil
}

// scanEnvelope checks that data is one JSON object and records where the
// members field knows lie (see scanMembers). The error says what data is
// instead: not JSON, or JSON but not an object.
func scanEnvelope(data []byte, field func(key []byte) int, spans []span) (dup int, err *DecodeError) {
	dup, ok := scanMembers(data, field, spans)
	if ok {
		return dup, nil
	}
	if i := jsonwire.SkipSpace(data, 0); i < len(data) && data[i] == '{' || !jsonwire.Valid(data) {
		return -1, syntaxError("", data)
	}
	r := reader{data: data}
	return -1, malformed("", "must be a JSON object, not "+r.kind(trimmed(data)))
}

// version checks the "v" member.
func (r *reader) version(s span) *DecodeError {
	const want = "this reader understands version 1"
	if !s.present() || r.isNull(s) {
		return &DecodeError{Field: "v", Reason: "missing; " + want, Err: ErrVersion}
	}
	v, st := r.int64(s)
	if st != jsonwire.IntOK {
		return &DecodeError{Field: "v", Reason: "must be the integer 1, not " + quoteRaw(r.raw(s)), Err: ErrVersion}
	}
	if v != Version {
		return &DecodeError{Field: "v", Reason: "version " + strconv.FormatInt(v, 10) + " is not supported; " + want, Err: ErrVersion}
	}
	return nil
}

// errKeyMismatch is the error of a call whose key is not the key of its
// content. Such a call would take another call's identity: its result would
// be stored under that call's key and delivered to it, whatever its scope.
func errKeyMismatch() *DecodeError {
	return malformed("key", "is not the key of this call's tenant, session, id, tool and input")
}

// EncodeCall encodes a call, setting c.V to Version and, when c.Key is
// empty, c.Key to c.CallKey(). It refuses (with a
// *DecodeError) a call DecodeCall would refuse, except for the size limit,
// which is the reader's to set: see Call.Validate.
func EncodeCall(c *Call) ([]byte, error) {
	if c == nil {
		return nil, malformed("", "no call")
	}
	n := 250 + len(c.Input) + len(c.ID) + len(c.Tool) + len(c.Tenant) + len(c.Session) + len(c.ReplyTo) + len(c.Traceparent) + len(c.OriginalID)
	b, err := AppendCall(make([]byte, 0, n), c)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// AppendCall is EncodeCall appending to dst: it returns dst extended by the
// encoded call, or dst unchanged and the error. With a buffer kept for reuse
// it encodes without allocating:
//
//	buf, err = envelope.AppendCall(buf[:0], &call)
//
// The buffer may be reused once the message is sent: a synchronous publish
// (jetstream.JetStream.PublishMsg) is done with it when it returns, an
// asynchronous one (PublishMsgAsync) only when its PubAck has arrived.
func AppendCall(dst []byte, c *Call) ([]byte, error) {
	if c == nil {
		return dst, malformed("", "no call")
	}
	if err := c.validateFields(); err != nil {
		return dst, err
	}
	if err := checkInput(c.Input, 0); err != nil {
		return dst, err
	}
	if c.V != Version {
		c.V = Version
	}
	if c.Key == "" {
		c.Key = c.CallKey()
	} else if !c.keyMatches() {
		return dst, errKeyMismatch()
	}
	b := append(dst, `{"v":1`...)
	b = appendStringField(b, "id", c.ID, false)
	b = appendStringField(b, "tool", c.Tool, false)
	b = appendStringField(b, "key", c.Key, false)
	b = appendStringField(b, "tenant", c.Tenant, true)
	b = appendStringField(b, "session", c.Session, true)
	b = appendStringField(b, "reply_to", c.ReplyTo, true)
	var err error
	if b, err = appendTimeField(b, "created_at", c.CreatedAt); err != nil {
		return dst, malformed("created_at", "cannot be written as RFC 3339: "+err.Error())
	}
	if b, err = appendTimeField(b, "deadline", c.Deadline); err != nil {
		return dst, malformed("deadline", "cannot be written as RFC 3339: "+err.Error())
	}
	b = appendStringField(b, "traceparent", c.Traceparent, true)
	b = appendStringField(b, "original_id", c.OriginalID, true)
	b = append(appendKey(b, "input"), trimSpace(c.Input)...)
	return append(b, '}'), nil
}

// Result fields, as indexes into a span table.
const (
	resV = iota
	resCallID
	resTool
	resContent
	resIsError
	resClass
	resCode
	resRetryable
	resRetryAfter
	resAttempts
	resWorkerID
	resQueueWait
	resExecTime
	resKey
	numResFields
)

var resFieldNames = [numResFields]string{"v", "call_id", "tool", "content", "is_error", "class", "code", "retryable", "retry_after_ns", "attempts", "worker_id", "queue_wait_ns", "exec_time_ns", "key"}

func resField(key []byte) int {
	switch string(key) {
	case "v":
		return resV
	case "call_id":
		return resCallID
	case "tool":
		return resTool
	case "content":
		return resContent
	case "is_error":
		return resIsError
	case "class":
		return resClass
	case "code":
		return resCode
	case "retryable":
		return resRetryable
	case "retry_after_ns":
		return resRetryAfter
	case "attempts":
		return resAttempts
	case "worker_id":
		return resWorkerID
	case "queue_wait_ns":
		return resQueueWait
	case "exec_time_ns":
		return resExecTime
	case "key":
		return resKey
	}
	return -1
}

// DecodeResult strictly decodes a result envelope. Errors are *DecodeError
// wrapping ErrMalformed, ErrVersion or ErrTooLarge.
//
// It refuses: a message over MaxResultBytes; anything but one JSON object; a
// missing "v" or one other than Version; a field given twice; a missing or
// blank call_id; content that is neither an array of content blocks nor a
// string (see Content.UnmarshalJSON); durations and attempts that are not
// non-negative integers; a field of the wrong JSON type. Missing content is
// empty content. Unknown members are ignored, as in DecodeCall, and the class
// is taken as written (see Class.Valid).
//
// The returned Result does not alias data.
func DecodeResult(data []byte) (*Result, error) {
	if len(data) > MaxResultBytes {
		return nil, &DecodeError{Reason: "message is " + formatCount(len(data)) + " bytes; the limit is " + formatCount(MaxResultBytes), Err: ErrTooLarge}
	}
	var spans [numResFields]span
	dup, err := scanEnvelope(data, resField, spans[:])
	if err != nil {
		return nil, err
	}
	r := reader{data: data}
	if err := r.version(spans[resV]); err != nil {
		return nil, err
	}
	if dup >= 0 {
		return nil, malformed(resFieldNames[dup], "appears more than once")
	}
	size := 0
	for _, f := range resStrings {
		if s := spans[f]; s.present() && !r.isString(s) && !r.isNull(s) {
			return nil, malformed(resFieldNames[f], "must be a string, not "+r.kind(s))
		}
		size += r.stringSize(spans[f])
	}
	// The content is located now, to size the arena, but its errors come
	// after those of the other fields.
	var blockBuf [4]blockAt
	blocks := blockBuf[:0]
	var contentErr *DecodeError
	if s := spans[resContent]; s.present() {
		var n int
		blocks, n, contentErr = r.locateContent(s, "content", blocks)
		size += n
	}
	r.arena.Grow(size)

	// A result and its one block, the usual content, share an allocation.
	var res *Result
	if len(blocks) == 1 && contentErr == nil {
		rb := &resultAndBlock{}
		res = &rb.res
		res.Content = rb.block[:]
	} else {
		res = &Result{}
		if len(blocks) > 0 && contentErr == nil {
			res.Content = make(Content, len(blocks))
		}
	}
	res.V = Version
	var class string
	for f, p := range []*string{resCallID: &res.CallID, resKey: &res.Key, resTool: &res.Tool, resClass: &class, resCode: &res.Code, resWorkerID: &res.WorkerID} {
		if p != nil && spans[f].present() {
			*p, _ = r.string(spans[f]) // checked above
		}
	}
	res.Class = Class(class)
	if strings.TrimSpace(res.CallID) == "" {
		return nil, malformed("call_id", "missing; it must be the id of the call answered")
	}
	if res.Key != "" && !ValidKey(res.Key) {
		return nil, malformed("key", "must be a call key: "+formatCount(KeyLen)+" characters of a-z and 2-7, got "+quoteShort(res.Key))
	}
	for f, p := range []*bool{resIsError: &res.IsError, resRetryable: &res.Retryable} {
		if p == nil || !spans[f].present() {
			continue
		}
		v, ok := r.bool(spans[f])
		if !ok {
			return nil, malformed(resFieldNames[f], "must be a boolean, not "+r.kind(spans[f]))
		}
		*p = v
	}
	for f, p := range []*int64{resRetryAfter: (*int64)(&res.RetryAfter), resQueueWait: (*int64)(&res.QueueWait), resExecTime: (*int64)(&res.ExecTime)} {
		if p == nil || !spans[f].present() {
			continue
		}
		v, err := r.count(spans[f], resFieldNames[f], "nanoseconds")
		if err != nil {
			return nil, err
		}
		*p = v
	}
	if s := spans[resAttempts]; s.present() {
		v, err := r.count(s, "attempts", "executions")
		if err != nil {
			return nil, err
		}
		if v > int64(maxInt) {
			return nil, malformed("attempts", "is out of range")
		}
		res.Attempts = int(v)
	}
	if contentErr != nil {
		return nil, contentErr
	}
	r.fillContent(blocks, res.Content)
	return res, nil
}

// resStrings are the string fields of a result, in the order their errors
// are reported.
var resStrings = [...]int{resCallID, resKey, resTool, resClass, resCode, resWorkerID}

// resultAndBlock is a result with room for one content block.
type resultAndBlock struct {
	res   Result
	block [1]Block
}

const maxInt = int(^uint(0) >> 1)

// count decodes a non-negative integer.
func (r *reader) count(s span, field, unit string) (int64, *DecodeError) {
	v, st := r.int64(s)
	switch {
	case st == jsonwire.IntRange:
		return 0, malformed(field, "is out of range")
	case st != jsonwire.IntOK:
		return 0, malformed(field, "must be a whole number of "+unit+", not "+quoteRaw(r.raw(s)))
	case v < 0:
		return 0, malformed(field, "must not be negative")
	}
	return v, nil
}

// EncodeResult encodes a result, setting r.V to Version. A result without a
// call id, or with a content block that cannot be written, is refused with a
// *DecodeError. Negative durations and attempts carry no meaning and are
// written as 0.
func EncodeResult(r *Result) ([]byte, error) {
	if r == nil {
		return nil, malformed("", "no result")
	}
	b, err := AppendResult(make([]byte, 0, 160+len(r.CallID)+len(r.Key)+len(r.Tool)+len(r.Code)+len(r.WorkerID)+len(r.Class)+contentSizeHint(r.Content)), r)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// AppendResult is EncodeResult appending to dst: it returns dst extended by
// the encoded result, or dst unchanged and the error. With a buffer kept for
// reuse it encodes without allocating; see AppendCall for when the buffer
// may be reused.
func AppendResult(dst []byte, r *Result) ([]byte, error) {
	if r == nil {
		return dst, malformed("", "no result")
	}
	if strings.TrimSpace(r.CallID) == "" {
		return dst, malformed("call_id", "missing; it must be the id of the call answered")
	}
	if r.Key != "" && !ValidKey(r.Key) {
		return dst, malformed("key", "must be a call key: "+formatCount(KeyLen)+" characters of a-z and 2-7, got "+quoteShort(r.Key))
	}
	if r.V != Version {
		r.V = Version
	}
	b := append(dst, `{"v":1`...)
	b = appendStringField(b, "call_id", r.CallID, false)
	b = appendStringField(b, "key", r.Key, true)
	b = appendStringField(b, "tool", r.Tool, true)
	if r.IsError {
		b = append(appendKey(b, "is_error"), "true"...)
	}
	b = appendStringField(b, "class", string(r.Class), true)
	b = appendStringField(b, "code", r.Code, true)
	if r.Retryable {
		b = append(appendKey(b, "retryable"), "true"...)
	}
	b = appendIntField(b, "retry_after_ns", nonNegative(int64(r.RetryAfter)))
	b = appendIntField(b, "attempts", nonNegative(int64(r.Attempts)))
	b = appendStringField(b, "worker_id", r.WorkerID, true)
	b = appendIntField(b, "queue_wait_ns", nonNegative(int64(r.QueueWait)))
	b = appendIntField(b, "exec_time_ns", nonNegative(int64(r.ExecTime)))
	b = appendKey(b, "content")
	b, err := appendContent(b, r.Content, "content")
	if err != nil {
		return dst, err
	}
	return append(b, '}'), nil
}
