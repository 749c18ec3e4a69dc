package worker

import (
	"strings"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// parseAckSubject reads a delivered message's JetStream metadata from its
// reply subject into md, as nats.go's Msg.Metadata does but into memory the
// caller holds (the job), and reports whether reply is an ack subject:
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>
//	$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>[.<token>...]
//
// (9 tokens, or at least 11). A domain "_" is none.
func parseAckSubject(reply string, md *js.MsgMetadata) bool {
	const prefix = "$JS.ACK."
	n := strings.Count(reply, ".") + 1
	if !strings.HasPrefix(reply, prefix) || n != 9 && n < 11 {
		return false
	}
	rest := reply[len(prefix):]
	next := func() string {
		tok, after, _ := strings.Cut(rest, ".")
		rest = after
		return tok
	}
	*md = js.MsgMetadata{}
	if n >= 11 {
		if md.Domain = next(); md.Domain == "_" {
			md.Domain = ""
		}
		next() // the account hash
	}
	md.Stream, md.Consumer = next(), next()
	md.NumDelivered = ackNum(next())
	md.Sequence.Stream, md.Sequence.Consumer = ackNum(next()), ackNum(next())
	md.Timestamp = time.Unix(0, int64(ackNum(next())))
	md.NumPending = ackNum(next())
	return true
}

// ackNum is a token of an ack subject as a number: 0 when it is not all
// digits, as nats.go reads it.
func ackNum(s string) uint64 {
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}
