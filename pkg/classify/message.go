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
		writeTimedOut(&b, tool, in)
	case d.Code == CodeHTTP429:
		d.writeRateLimited(&b, tool, in)
	default:
		d.writeFailed(&b, tool, cause, in)
	}
	d.writeNextStep(&b, in)
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

// writeTimedOut writes that tool did not answer in time.
func writeTimedOut(b *strings.Builder, tool string, in MessageInput) {
	b.WriteString(tool)
	if in.Timeout > 0 {
		b.WriteString(" did not answer within ")
		b.WriteString(FormatDuration(in.Timeout))
	} else {
		b.WriteString(" did not answer in time")
	}
	if in.Attempts > 1 {
		b.WriteString(" (")
		b.WriteString(strconv.Itoa(in.Attempts))
		b.WriteString(" attempts)")
	}
	b.WriteString(".")
}

// writeRateLimited writes that tool's service refused it with HTTP 429, and
// when it may work again.
func (d Decision) writeRateLimited(b *strings.Builder, tool string, in MessageInput) {
	b.WriteString(tool)
	b.WriteString(" was rate limited by its service (HTTP 429)")
	if in.Attempts > 1 {
		b.WriteString(" on each of ")
		b.WriteString(strconv.Itoa(in.Attempts))
		b.WriteString(" attempts")
	}
	b.WriteString(".")
	if d.RetryAfter > 0 {
		b.WriteString(" It may work again in about ")
		b.WriteString(FormatDuration(d.RetryAfter))
		b.WriteString(".")
	} else {
		b.WriteString(" It may work again after a short wait.")
	}
}

// writeFailed writes that tool failed, and why.
func (d Decision) writeFailed(b *strings.Builder, tool, cause string, in MessageInput) {
	b.WriteString(tool)
	b.WriteString(" failed")
	if in.Attempts > 1 {
		b.WriteString(" after ")
		b.WriteString(strconv.Itoa(in.Attempts))
		b.WriteString(" attempts")
	}
	b.WriteString(": ")
	b.WriteString(cause)
	b.WriteString(".")
	if d.Retryable && d.RetryAfter > 0 {
		b.WriteString(" It may work again in about ")
		b.WriteString(FormatDuration(d.RetryAfter))
		b.WriteString(".")
	}
}

// writeNextStep writes what the model could do next: a different approach
// when retries ran out or the deadline leaves no time, else the hint.
func (d Decision) writeNextStep(b *strings.Builder, in MessageInput) {
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
}

func upperFirst(s string) string {
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}
