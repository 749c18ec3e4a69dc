// Package subject holds the rule for the tokens toolpool builds into NATS
// subjects from data: tool names, orchestrator instance ids (a call's
// reply_to), workers' liveness tokens and the like. It is the one place the
// rule is written: a tool name is such a token (the Anthropic Messages API
// asks the same of tool names), so pkg/tools, pkg/catalog and the envelope
// codec check names with ValidToken, and jetstream.CheckToken wraps it with
// an error that names what was checked. It has no dependencies, so the
// envelope codec can check a call at decode time.
package subject

// MaxTokenLen is the longest token accepted, in bytes. It keeps every subject
// the pool builds (and the consumer names derived from an instance id) far
// below the server's control-line limit of 4,096 bytes.
const MaxTokenLen = 64

// TokenPattern is ValidToken's rule as a regular expression.
const TokenPattern = `^[a-zA-Z0-9_-]{1,64}$`

// TokenChars says in words what ValidToken accepts, for error messages
// ("must be " + TokenChars).
const TokenChars = "1 to 64 letters, digits, '_' or '-'"

// TokenRule says what ValidToken accepts, for error messages.
const TokenRule = "must be " + TokenChars + " (one NATS subject token)"

// ValidToken reports whether s is 1 to MaxTokenLen bytes of ASCII letters,
// digits, '_' and '-' (TokenPattern). Such a token is one subject token (no
// '.', no wildcard, no white space) and is also valid in stream, consumer and
// KV key names, so it can go anywhere the pool puts it.
func ValidToken(s string) bool {
	if len(s) == 0 || len(s) > MaxTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
