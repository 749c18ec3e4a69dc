package envelope

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"sync"

	"github.com/toolpool/toolpool/internal/infra/jsonwire"
)

// KeyLen is the length of a call key: 160 bits of SHA-256 in lower-case
// base32 without padding.
const KeyLen = 32

// keyDomain starts the hashed text, so that a key can never equal a hash
// some other part of the system makes of the same fields.
const keyDomain = "toolpool call key v1\x00"

var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

var keyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// CallKey is the identity of a call: a hash of its scope (tenant and
// session), the model's tool_use id, the tool and the input, with the input's
// insignificant whitespace removed. The same id with the same content in the
// same scope is the same call and gets the same key; anything else gets
// another one. Each field is hashed with its length in front, so no two
// different field lists hash the same text.
//
// The key is KeyLen characters of [a-z2-7]: a valid NATS subject token and
// Nats-Msg-Id. It names the call's message in TOOL_CALLS, its result
// (tools.result.<instance>.<key>) and its dead letter. input should be valid
// JSON (the key of invalid input is well defined, but such a call is never
// published).
func CallKey(tenant, session, id, tool string, input []byte) string {
	k := keyOf(tenant, session, id, tool, input)
	return string(k[:])
}

// keyOf is CallKey without the string, so that comparing a key with it
// does not allocate.
func keyOf(tenant, session, id, tool string, input []byte) [KeyLen]byte {
	bp := keyBufs.Get().(*[]byte)
	b := append((*bp)[:0], keyDomain...)
	for _, f := range [...]string{tenant, session, id, tool} {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	lenAt := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	b = appendCompact(b, input)
	binary.BigEndian.PutUint64(b[lenAt:], uint64(len(b)-lenAt-8))
	sum := sha256.Sum256(b)
	*bp = b
	keyBufs.Put(bp)
	var out [KeyLen]byte
	keyEncoding.Encode(out[:], sum[:KeyLen*5/8])
	return out
}

// appendCompact appends src without the whitespace outside its strings:
// what json.Compact writes for valid JSON, without its per-byte state
// machine.
func appendCompact(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case jsonwire.IsSpace(c):
			i++
		case c == '"':
			end := jsonwire.SkipString(src, i)
			if end < 0 {
				return append(dst, src[i:]...)
			}
			dst = append(dst, src[i:end]...)
			i = end
		default:
			j := i + 1
			for j < len(src) && src[j] != '"' && !jsonwire.IsSpace(src[j]) {
				j++
			}
			dst = append(dst, src[i:j]...)
			i = j
		}
	}
	return dst
}

// ValidKey reports whether k has the form of a call key: KeyLen characters
// of [a-z2-7].
func ValidKey(k string) bool {
	if len(k) != KeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
			return false
		}
	}
	return true
}

// CallKey returns the key of c: CallKey of its tenant, session, id, tool and
// input.
func (c *Call) CallKey() string { return CallKey(c.Tenant, c.Session, c.ID, c.Tool, c.Input) }

// keyMatches reports whether c.Key is the key of c's content.
func (c *Call) keyMatches() bool {
	k := keyOf(c.Tenant, c.Session, c.ID, c.Tool, c.Input)
	return string(k[:]) == c.Key
}
