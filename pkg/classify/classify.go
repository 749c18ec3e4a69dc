package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// Codes say what went wrong, for machines. The class says what to do about it.
const (
	CodeTimeout         = "timeout"            // the attempt ran past its timeout, or the service timed out
	CodeHTTP429         = "http_429"           // the service answered 429 Too Many Requests
	CodeUnavailable     = "unavailable"        // 5xx generic; HTTP codes use "http_<status>"
	CodeConnRefused     = "connection_refused" // nothing listened at the address
	CodeConnReset       = "connection_reset"   // the connection broke mid-request
	CodeDNSNotFound     = "dns_not_found"      // the host name does not exist
	CodeDNSTemporary    = "dns_temporary"      // the host name could not be resolved right now
	CodeTLS             = "tls"                // TLS failed: a certificate was refused, or the peer does not speak TLS
	CodeNotFound        = "not_found"          // a file or directory does not exist
	CodePermission      = "permission_denied"  // the operating system refused access
	CodeInvalidArgument = "invalid_argument"   // the input does not match the tool's schema, or the tool refused it
	CodeUnknownTool     = "unknown_tool"       // no tool of that name
	CodePanic           = "panic"              // the tool panicked
	CodeInternal        = "internal"           // an error nothing above explains
	CodeDeadline        = "deadline_exceeded"  // the call's overall deadline passed
	CodeTransient       = "transient"          // Transient(err) with no better code
	CodePermanent       = "permanent"          // Permanent(err) with no better code
	CodeCanceled        = "canceled"           // the attempt's context was canceled: the worker was stopping
	CodeNetwork         = "network"            // another network failure: unreachable host or network, closed connection
	CodePoison          = "poison"             // every delivery of the call killed its worker
	CodeOutcomeUnknown  = "outcome_unknown"    // an attempt of a tool that is not idempotent started and never reported
	CodeNoWorker        = "no_worker"          // the tool is known but no live worker serves it right now
)

// Decision is what Classify concludes about an error.
type Decision struct {
	Class      envelope.Class // what kind of failure; ClassNone for no error
	Code       string         // what went wrong, one of the Code constants or "http_<status>"
	Retryable  bool           // another attempt may succeed
	RetryAfter time.Duration  // from a Retry-After, 0 if none
	// Cause is a short, model-safe description of what went wrong: no Go type
	// names, stack traces, credentials or internal host names.
	Cause string
	// Hint says what the model could try next.
	Hint string
	// Fields lists the bad fields of a validation error, in a stable order.
	Fields []FieldError
}

// The decisions of the codes classifyChain gives, computed once.
var (
	decTimeout      = fromCode(CodeTimeout)
	decCanceled     = fromCode(CodeCanceled)
	decConnRefused  = fromCode(CodeConnRefused)
	decConnReset    = fromCode(CodeConnReset)
	decNetwork      = fromCode(CodeNetwork)
	decDNSNotFound  = fromCode(CodeDNSNotFound)
	decDNSTemporary = fromCode(CodeDNSTemporary)
	decTLS          = fromCode(CodeTLS)
	decNotFound     = fromCode(CodeNotFound)
	decPermission   = fromCode(CodePermission)
	decPanic        = fromCode(CodePanic)
	decInternal     = fromCode(CodeInternal)
)

// Classify decides the class of err with errors.Is / errors.As; never by
// message text. A nil error gives the zero Decision. An unknown error is
// ClassInternal and not retryable.
//
// Precedence: the explicit markers (Transient, Permanent, RetryAfter) force
// their class over whatever the rest of the chain gives, keeping its code;
// the outermost marker wins. Below them: the pool's own outcomes (the
// call's deadline passed, a poison call), *ValidationError,
// *UnknownToolError, *PanicError; then *HTTPError; then context errors and
// timeouts; then network and file-system errors. A message attached with
// WithMessage becomes the Cause.
func Classify(err error) Decision {
	if err == nil {
		return Decision{}
	}
	d := classifyChain(err)
	if m, ok := errors.AsType[*markedError](err); ok && m != nil {
		if d.Code == CodeInternal {
			code := CodeTransient
			if m.class == envelope.ClassPermanent {
				code = CodePermanent
			}
			d = fromCode(code)
		}
		if d.Class != m.class {
			d.Class = m.class
			d.Hint = classHint(m.class)
		}
		d.Retryable = m.class == envelope.ClassTransient
		if !d.Retryable {
			d.RetryAfter = 0
		}
		if m.retryAfter > 0 {
			d.RetryAfter = m.retryAfter
		}
	}
	if m, ok := errors.AsType[*messageError](err); ok && m != nil {
		if msg := strings.TrimSpace(m.msg); msg != "" {
			d.Cause = msg
		}
	}
	return d
}

// classifyChain classifies err ignoring the explicit markers. A typed nil
// pointer in the chain (a tool returning a nil *HTTPError as an error) is
// skipped rather than dereferenced.
func classifyChain(err error) Decision {
	// Our own outcomes.
	if oe, ok := errors.AsType[*outcomeError](err); ok && oe != nil {
		return fromCode(oe.code)
	}
	if ve, ok := errors.AsType[*ValidationError](err); ok && ve != nil {
		return validationDecision(ve)
	}
	if ue, ok := errors.AsType[*UnknownToolError](err); ok && ue != nil {
		return unknownToolDecision(ue)
	}
	if _, ok := errors.AsType[*PanicError](err); ok {
		return decPanic
	}

	// HTTP responses.
	if he, ok := errors.AsType[*HTTPError](err); ok && he != nil {
		d := httpDecision(he.StatusCode)
		if d.Retryable {
			d.RetryAfter = he.retryAfter()
		}
		return d
	}

	// Context errors and timeouts. A *TimeoutError matches
	// context.DeadlineExceeded; a net.Error may say Timeout without either.
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return decTimeout
	}
	if errors.Is(err, context.Canceled) {
		return decCanceled
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return decTimeout
	}

	// Network and OS errors. A system call's errno, as dials, reads, writes
	// and opens report it inside *net.OpError, *os.SyscallError or
	// *fs.PathError, decides most of them.
	if errno, ok := errors.AsType[syscall.Errno](err); ok {
		switch errno {
		case syscall.ECONNREFUSED:
			return decConnRefused
		case syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE:
			return decConnReset
		case syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.EHOSTDOWN, syscall.ENETDOWN:
			return decNetwork
		}
	}
	if de, ok := errors.AsType[*net.DNSError](err); ok && de != nil {
		if de.IsNotFound && !de.IsTemporary && !de.IsTimeout {
			return decDNSNotFound
		}
		return decDNSTemporary
	}
	if errors.Is(err, fs.ErrNotExist) {
		return decNotFound
	}
	if errors.Is(err, fs.ErrPermission) {
		return decPermission
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return decConnReset
	}
	if isTLSError(err) {
		return decTLS
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return decNetwork // net.ErrClosed and other failures of a connection
	}
	// An HTTP client reports a connection the server closed mid-request as a
	// *url.Error around io.EOF.
	if _, ok := errors.AsType[*url.Error](err); ok && errors.Is(err, io.EOF) {
		return decConnReset
	}
	if errors.Is(err, net.ErrClosed) {
		return decNetwork
	}
	return decInternal
}

func isTLSError(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.SystemRootsError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true
	}
	return false
}

// maxFieldsInCause bounds how many bad fields the model is told about.
const maxFieldsInCause = 20

func validationDecision(e *ValidationError) Decision {
	d := fromCode(CodeInvalidArgument)
	if len(e.Fields) == 0 {
		d.Hint = hintValidation
		return d
	}
	d.Fields = slices.Clone(e.Fields)
	slices.SortStableFunc(d.Fields, func(a, b FieldError) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	var b strings.Builder
	for i, f := range d.Fields {
		if i == maxFieldsInCause {
			b.WriteString("; and ")
			b.WriteString(strconv.Itoa(len(d.Fields) - i))
			b.WriteString(" more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	d.Cause = b.String()
	return d
}

func unknownToolDecision(e *UnknownToolError) Decision {
	d := fromCode(CodeUnknownTool)
	d.Cause = "there is no tool named " + modelToolName(e.Tool)
	if len(e.Available) == 0 {
		d.Hint = hintNoTools
		return d
	}
	names := slices.Clone(e.Available)
	slices.Sort(names)
	d.Hint = "Available tools: " + strings.Join(slices.Compact(names), ", ") + "."
	return d
}

// modelToolName renders a tool name the model asked for: as is when it is a
// valid tool name, else quoted and cut to a sane length.
func modelToolName(name string) string {
	const maxLen = 64
	valid := name != "" && len(name) <= maxLen
	for i := 0; valid && i < len(name); i++ {
		c := name[i]
		valid = c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if valid {
		return name
	}
	if r := []rune(name); len(r) > maxLen {
		name = string(r[:maxLen]) + "…"
	}
	return strconv.Quote(name)
}
