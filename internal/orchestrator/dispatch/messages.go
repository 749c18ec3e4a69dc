package dispatch

import (
	"slices"
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
	return errorResult("", tool, envelope.ClassValidation, classify.CodeInvalidArgument, classify.MissingIDMessage(tool))
}

// deadlineResult answers a call with no result by its deadline.
func deadlineResult(id, tool string, waited time.Duration) envelope.Result {
	return errorResult(id, tool, envelope.ClassTransient, classify.CodeDeadline, classify.NoResultMessage(tool, waited))
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

// CodeNoWorker is the code of the is_error result of a call to a tool that
// is known but that no live worker serves right now (ToolInfo.NoWorker); the
// same as classify.CodeNoWorker.
const CodeNoWorker = classify.CodeNoWorker

// noWorkerResult answers a call to a known tool no live worker serves, with
// classify.NoWorkerMessage.
func noWorkerResult(id, tool string, available []string) envelope.Result {
	return errorResult(id, tool, envelope.ClassTransient, CodeNoWorker, classify.NoWorkerMessage(tool, available))
}
