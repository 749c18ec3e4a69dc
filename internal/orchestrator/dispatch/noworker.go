package dispatch

import (
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// CodeNoWorker is the code of the is_error result of a call to a tool that
// is known but that no live worker serves right now (ToolInfo.NoWorker); the
// same as classify.CodeNoWorker.
const CodeNoWorker = classify.CodeNoWorker

// noWorkerResult answers a call to a known tool no live worker serves, with
// classify.NoWorkerMessage.
func noWorkerResult(id, tool string, available []string) envelope.Result {
	return errorResult(id, tool, envelope.ClassTransient, CodeNoWorker, classify.NoWorkerMessage(tool, available))
}
