package worker

import (
	"testing"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// parseAckSubject reads what nats.go reads from a delivered message's
// reply subject (its Metadata, the same parser in both of its APIs), from
// both forms of the ack subject, and refuses what it refuses.
func TestParseAckSubject(t *testing.T) {
	t.Parallel()
	for _, reply := range []string{
		"$JS.ACK.TOOL_CALLS.tool_echo.2.1234.17.1764640000123456789.5",
		"$JS.ACK._.ACCHASH.TOOL_CALLS.tool_echo.1.99.3.1764640000123456789.0.tok",
		"$JS.ACK.hub.ACCHASH.TOOL_CALLS.tool_echo.3.7.7.1764640000000000001.12",
		"$JS.ACK.hub.ACCHASH.TOOL_CALLS.tool_echo.3.7.7.1764640000000000001.12.tok.more",
		"$JS.ACK.TOOL_CALLS.tool_echo.x.1234.17.1764640000123456789.5",
		"$JS.ACK.TOOL_CALLS.tool_echo.2.1234.17.1764640000123456789",
		"$JS.ACK.a.b.c.d.e.f.g.h.i",
		"$JS.NAK.TOOL_CALLS.tool_echo.2.1234.17.1764640000123456789.5",
		"_INBOX.abc",
	} {
		want, wantErr := (&nats.Msg{Subject: "tools.call.echo", Reply: reply, Sub: &nats.Subscription{}}).Metadata()
		var got js.MsgMetadata
		ok := parseAckSubject(reply, &got)
		if ok != (wantErr == nil) {
			t.Errorf("%q: parsed %v, the client's error %v", reply, ok, wantErr)
			continue
		}
		if !ok {
			continue
		}
		if got.Stream != want.Stream || got.Consumer != want.Consumer || got.Domain != want.Domain ||
			got.NumDelivered != want.NumDelivered || got.NumPending != want.NumPending ||
			got.Sequence.Stream != want.Sequence.Stream || got.Sequence.Consumer != want.Sequence.Consumer ||
			!got.Timestamp.Equal(want.Timestamp) {
			t.Errorf("%q: parsed %+v, the client reads %+v", reply, got, *want)
		}
	}
}
