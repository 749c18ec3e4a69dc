package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// The retries of a publish that found no stream (a leader being elected),
// as nats.go's JetStream publish makes them.
const (
	publishRetryWait     = js.DefaultPubRetryWait
	publishRetryAttempts = js.DefaultPubRetryAttempts
)

// publishSync publishes m and waits for its PubAck, as JetStream's
// PublishMsg does (the same retries after "no responders", the same
// errors), on nc. A PubAck that says the message is stored is recognised on
// its text (pubAckStored), without decoding it; anything else is decoded
// as nats.go does.
func publishSync(ctx context.Context, nc *nats.Conn, m *nats.Msg) error {
	resp, err := nc.RequestMsgWithContext(ctx, m)
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < publishRetryAttempts; r++ {
		t := time.NewTimer(publishRetryWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		resp, err = nc.RequestMsgWithContext(ctx, m)
	}
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return js.ErrNoStreamResponse
	case err != nil:
		return err
	case pubAckStored(resp.Data):
		return nil
	}
	var ack struct {
		Error  *js.APIError `json:"error,omitempty"`
		Stream string       `json:"stream"`
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return js.ErrInvalidJSAck
	}
	if ack.Error != nil {
		return fmt.Errorf("nats: %w", ack.Error)
	}
	if ack.Stream == "" {
		return js.ErrInvalidJSAck
	}
	return nil
}

// pubAckStored reports whether data is a PubAck, in the form nats-server
// writes it, that says the message is stored: {"stream":"<name>", ...}
// with a stream named and no "error" anywhere (an API error is an "error"
// member, and no other value of a PubAck can hold that quoted word
// unescaped). False means "decode it to know", not "failed".
func pubAckStored(data []byte) bool {
	const head = `{"stream":"`
	data = bytes.TrimRight(data, " \t\r\n")
	return len(data) > len(head)+1 && bytes.HasPrefix(data, []byte(head)) && data[len(head)] != '"' &&
		data[len(data)-1] == '}' && !bytes.Contains(data, []byte(`"error"`))
}
