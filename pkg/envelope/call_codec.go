package envelope

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
	"github.com/toolpool/toolpool/internal/infra/subject"
)

// ValidToolName reports whether name is a valid tool name:
// ^[a-zA-Z0-9_-]{1,64}$, the rule of the Anthropic API. It is the rule of
// every token the pool builds into a subject (subject.ValidToken), and the
// one check of a tool name: the registry, the catalog and the codec use it.
func ValidToolName(name string) bool { return subject.ValidToken(name) }

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
