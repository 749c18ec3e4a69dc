package dispatch

import (
	"slices"
	"strings"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// CodeNoWorker is the code of the is_error result of a call to a tool that
// is known but that no live worker serves right now (ToolInfo.NoWorker).
const CodeNoWorker = "no_worker"

// NoWorkerMessage is the content of the is_error result of a call to tool
// when no live worker serves it; available are the tools served now.
func NoWorkerMessage(tool string, available []string) string {
	msg := "No worker serves the tool " + tool + " right now, so the call was not run. " +
		"It may be back soon: try again later, or use a different approach."
	names := slices.Compact(slices.Sorted(slices.Values(available)))
	if len(names) == 0 {
		return msg + " No tools are available right now."
	}
	return msg + " Tools available now: " + strings.Join(names, ", ") + "."
}

// noWorkerResult answers a call to a known tool no live worker serves.
func noWorkerResult(id, tool string, available []string) envelope.Result {
	return errorResult(id, tool, envelope.ClassTransient, CodeNoWorker, NoWorkerMessage(tool, available))
}
