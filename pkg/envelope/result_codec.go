package envelope

import (
	"strings"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
)

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
	size, err := r.resultStringsSize(&spans)
	if err != nil {
		return nil, err
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

	res := newResult(len(blocks), contentErr == nil)
	if err := r.resultStrings(res, &spans); err != nil {
		return nil, err
	}
	if err := r.resultNumbers(res, &spans); err != nil {
		return nil, err
	}
	if contentErr != nil {
		return nil, contentErr
	}
	r.fillContent(blocks, res.Content)
	return res, nil
}

// resultStringsSize checks that the string fields of a result are strings
// (or null) and returns the arena room their values take.
func (r *reader) resultStringsSize(spans *[numResFields]span) (int, *DecodeError) {
	size := 0
	for _, f := range resStrings {
		if s := spans[f]; s.present() && !r.isString(s) && !r.isNull(s) {
			return 0, malformed(resFieldNames[f], "must be a string, not "+r.kind(s))
		}
		size += r.stringSize(spans[f])
	}
	return size, nil
}

// newResult allocates a result with room for its blocks of content (none
// when the content is in error). A result and its one block, the usual
// content, share an allocation.
func newResult(blocks int, contentOK bool) *Result {
	if blocks == 1 && contentOK {
		rb := &resultAndBlock{}
		rb.res.Content = rb.block[:]
		return &rb.res
	}
	res := &Result{}
	if blocks > 0 && contentOK {
		res.Content = make(Content, blocks)
	}
	return res
}

// resultStrings decodes the string fields of a result into res (the arena
// is sized) and checks the call id and the key.
func (r *reader) resultStrings(res *Result, spans *[numResFields]span) *DecodeError {
	res.V = Version
	var class string
	for f, p := range []*string{resCallID: &res.CallID, resKey: &res.Key, resTool: &res.Tool, resClass: &class, resCode: &res.Code, resWorkerID: &res.WorkerID} {
		if p != nil && spans[f].present() {
			*p, _ = r.string(spans[f]) // checked by resultStringsSize
		}
	}
	res.Class = Class(class)
	if strings.TrimSpace(res.CallID) == "" {
		return malformed("call_id", "missing; it must be the id of the call answered")
	}
	if res.Key != "" && !ValidKey(res.Key) {
		return malformed("key", "must be a call key: "+formatCount(KeyLen)+" characters of a-z and 2-7, got "+quoteShort(res.Key))
	}
	return nil
}

// resultNumbers decodes the booleans, durations and attempts of a result
// into res.
func (r *reader) resultNumbers(res *Result, spans *[numResFields]span) *DecodeError {
	for f, p := range []*bool{resIsError: &res.IsError, resRetryable: &res.Retryable} {
		if p == nil || !spans[f].present() {
			continue
		}
		v, ok := r.bool(spans[f])
		if !ok {
			return malformed(resFieldNames[f], "must be a boolean, not "+r.kind(spans[f]))
		}
		*p = v
	}
	for f, p := range []*int64{resRetryAfter: (*int64)(&res.RetryAfter), resQueueWait: (*int64)(&res.QueueWait), resExecTime: (*int64)(&res.ExecTime)} {
		if p == nil || !spans[f].present() {
			continue
		}
		v, err := r.count(spans[f], resFieldNames[f], "nanoseconds")
		if err != nil {
			return err
		}
		*p = v
	}
	if s := spans[resAttempts]; s.present() {
		v, err := r.count(s, "attempts", "executions")
		if err != nil {
			return err
		}
		if v > int64(maxInt) {
			return malformed("attempts", "is out of range")
		}
		res.Attempts = int(v)
	}
	return nil
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
