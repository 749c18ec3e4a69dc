package dispatch

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// errorResult is an is_error result the dispatcher answers by itself.
func errorResult(id, tool string, class envelope.Class, code, text string) envelope.Result {
	return envelope.Result{
		V:       envelope.Version,
		CallID:  id,
		Tool:    tool,
		Content: envelope.Text(text),
		IsError: true,
		Class:   class,
		Code:    code,
	}
}

// decisionResult is an is_error result whose content classify writes.
func decisionResult(id, tool string, err error) envelope.Result {
	d := classify.Classify(err)
	r := errorResult(id, tool, d.Class, d.Code, d.Message(classify.MessageInput{Tool: tool}))
	if r.Class == envelope.ClassNone {
		r.Class = envelope.ClassValidation
	}
	return r
}

// unknownToolResult answers a call to a tool no one serves.
func unknownToolResult(id, tool string, available []string) envelope.Result {
	r := decisionResult(id, tool, &classify.UnknownToolError{Tool: tool, Available: available})
	r.Class, r.Code = envelope.ClassValidation, classify.CodeUnknownTool
	return r
}

// invalidInputResult answers a call whose input the dispatcher rejects
// before publishing it.
func invalidInputResult(id, tool, reason string) envelope.Result {
	r := decisionResult(id, tool, &classify.ValidationError{
		Tool:   tool,
		Fields: []classify.FieldError{{Path: "", Reason: reason}},
	})
	r.Class = envelope.ClassValidation
	if r.Code == "" {
		r.Code = classify.CodeInvalidArgument
	}
	return r
}

// missingIDResult answers a tool_use block without an id.
func missingIDResult(tool string) envelope.Result {
	return errorResult("", tool, envelope.ClassValidation, classify.CodeInvalidArgument,
		fmt.Sprintf("The call to %s has no tool_use id, so it was not run: every tool_use block needs a unique id.", tool))
}

// deadlineResult answers a call with no result by its deadline.
func deadlineResult(id, tool string, waited time.Duration) envelope.Result {
	return errorResult(id, tool, envelope.ClassTransient, classify.CodeDeadline, DeadlineMessage(tool, waited))
}

// DeadlineMessage is the content of the is_error result of a call to tool
// that returned no result within waited.
func DeadlineMessage(tool string, waited time.Duration) string {
	return fmt.Sprintf("The tool %s returned no result within %s; it may still be running. Try again later or use a different approach.",
		tool, formatWait(waited))
}

// AdviceMessage is the sentence added to the content of an is_error result
// when tool has failed n times in a row in one session.
func AdviceMessage(tool string, n int) string {
	return fmt.Sprintf("The tool %s has now failed %d times in a row in this session: stop retrying it and use a different approach.", tool, n)
}

// formatWait writes a wait for a person: "250ms", "1.5s", "30s", "2m",
// "1m30s".
func formatWait(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if ms := d.Round(time.Millisecond); ms < time.Second {
		return strconv.FormatInt(ms.Milliseconds(), 10) + "ms"
	}
	if tenths := d.Round(100 * time.Millisecond); tenths < 10*time.Second {
		return strconv.FormatFloat(tenths.Seconds(), 'f', -1, 64) + "s"
	}
	d = d.Round(time.Second)
	if d < time.Minute {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	m, s := int64(d/time.Minute), int64(d%time.Minute/time.Second)
	if s == 0 {
		return strconv.FormatInt(m, 10) + "m"
	}
	return strconv.FormatInt(m, 10) + "m" + strconv.FormatInt(s, 10) + "s"
}

// withSentence returns content with sentence appended to its last text
// block, or as a new text block when it has none. content is not modified.
func withSentence(content envelope.Content, sentence string) envelope.Content {
	out := slices.Clone(content)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i].Type == "text" {
			if out[i].Text == "" {
				out[i].Text = sentence
			} else {
				out[i].Text += " " + sentence
			}
			return out
		}
	}
	return append(out, envelope.Block{Type: "text", Text: sentence})
}
