package jetstream

import (
	"fmt"

	"github.com/toolpool/toolpool/internal/infra/subject"
)

// MaxTokenLen is the longest token CheckToken accepts, in bytes.
const MaxTokenLen = subject.MaxTokenLen

// CheckToken checks a token the pool builds into a subject (or a consumer
// or KV key name) from data it did not choose: a tool name, an
// orchestrator instance id, a call's reply_to. It must be 1 to MaxTokenLen
// (64) bytes of ASCII letters, digits, '_' and '-'. Anything else could
// address other subjects ('.', '*', '>'), break the protocol line (spaces,
// control characters) or, at a few thousand bytes, make the server close the
// connection for good ("maximum control line exceeded"). The error names
// kind (e.g. "instance") and shows the start of s.
func CheckToken(kind, s string) error {
	if subject.ValidToken(s) {
		return nil
	}
	shown := s
	if len(shown) > 40 {
		shown = shown[:40] + "..."
	}
	return fmt.Errorf("%s %q (%d bytes) %s", kind, shown, len(s), subject.TokenRule)
}
