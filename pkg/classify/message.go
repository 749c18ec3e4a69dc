package classify

import (
	"strconv"
	"strings"
	"time"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// MessageInput is what Message needs besides the decision.
type MessageInput struct {
	Tool      string        // the tool's name; "" writes "The tool"
	Attempts  int           // executions so far
	Timeout   time.Duration // the tool's per-attempt timeout, for timeout messages
	Exhausted bool          // retries ran out (dead-lettered)
	// GaveUp is set when a retryable error is answered now because the next
	// attempt would start past the call's deadline (Verdict.GaveUp).
	GaveUp bool
}

// Message writes the content of an is_error result for the model: it names
// the tool and the cause and says what to try next. A permanent error that ran
// once never mentions several attempts. The zero Decision (success) gives "".
func (d Decision) Message(in MessageInput) string {
	if d.Class == envelope.ClassNone {
		return ""
	}
	tool := "The tool"
	if in.Tool != "" {
		tool = "The tool " + in.Tool
	}
	var b strings.Builder
	b.Grow(192)
	cause := strings.TrimRight(d.Cause, ". ")
	if cause == "" {
		cause = fromCode(CodeInternal).Cause
	}
	switch {
	case d.Code == CodeUnknownTool:
		b.WriteString(upperFirst(cause))
		b.WriteString(".")
	case d.Code == CodeInvalidArgument && d.Class == envelope.ClassValidation:
		writeInvalidArguments(&b, in.Tool, cause)
	case d.Code == CodeTimeout:
		writeTimedOut(&b, tool, in.Timeout, in.Attempts)
	case d.Code == CodeHTTP429:
		writeRateLimited(&b, tool, in.Attempts, d.RetryAfter)
	default:
		var retryAfter time.Duration
		if d.Retryable {
			retryAfter = d.RetryAfter
		}
		writeFailed(&b, tool, cause, in.Attempts, retryAfter)
	}
	switch {
	case in.Exhausted:
		b.WriteString(" Retries ran out, so the call was set aside (dead-lettered). ")
		b.WriteString(hintDifferentApproach)
	case in.GaveUp:
		b.WriteString(" There is no time left for another attempt before the call's deadline. ")
		b.WriteString(hintDifferentApproach)
	default:
		hint := d.Hint
		if hint == "" {
			hint = classHint(d.Class)
		}
		b.WriteString(" ")
		b.WriteString(hint)
	}
	return b.String()
}

// writeInvalidArguments writes what was wrong with the arguments of tool.
func writeInvalidArguments(b *strings.Builder, tool, cause string) {
	b.WriteString("The arguments for ")
	if tool != "" {
		b.WriteString(tool)
	} else {
		b.WriteString("the tool")
	}
	b.WriteString(" are invalid: ")
	b.WriteString(cause)
	b.WriteString(".")
}

// writeTimedOut writes that tool did not answer within timeout (0: not
// known) in any of its attempts.
func writeTimedOut(b *strings.Builder, tool string, timeout time.Duration, attempts int) {
	b.WriteString(tool)
	if timeout > 0 {
		b.WriteString(" did not answer within ")
		b.WriteString(FormatDuration(timeout))
	} else {
		b.WriteString(" did not answer in time")
	}
	if attempts > 1 {
		b.WriteString(" (")
		b.WriteString(strconv.Itoa(attempts))
		b.WriteString(" attempts)")
	}
	b.WriteString(".")
}

// writeRateLimited writes that tool's service refused it with HTTP 429, and
// when it may work again (retryAfter 0: not known).
func writeRateLimited(b *strings.Builder, tool string, attempts int, retryAfter time.Duration) {
	b.WriteString(tool)
	b.WriteString(" was rate limited by its service (HTTP 429)")
	if attempts > 1 {
		b.WriteString(" on each of ")
		b.WriteString(strconv.Itoa(attempts))
		b.WriteString(" attempts")
	}
	b.WriteString(".")
	if retryAfter > 0 {
		b.WriteString(" It may work again in about ")
		b.WriteString(FormatDuration(retryAfter))
		b.WriteString(".")
	} else {
		b.WriteString(" It may work again after a short wait.")
	}
}

// writeFailed writes that tool failed, and why, and when it may work again
// (retryAfter 0: not said).
func writeFailed(b *strings.Builder, tool, cause string, attempts int, retryAfter time.Duration) {
	b.WriteString(tool)
	b.WriteString(" failed")
	if attempts > 1 {
		b.WriteString(" after ")
		b.WriteString(strconv.Itoa(attempts))
		b.WriteString(" attempts")
	}
	b.WriteString(": ")
	b.WriteString(cause)
	b.WriteString(".")
	if retryAfter > 0 {
		b.WriteString(" It may work again in about ")
		b.WriteString(FormatDuration(retryAfter))
		b.WriteString(".")
	}
}

func upperFirst(s string) string {
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}
