package jetstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// GetMsgFromLeader reads one message of the stream named stream from the
// stream's leader ($JS.API.STREAM.MSG.GET), never through a direct get:
// the message at seq, or, with nextBySubject set, the first message at or
// after seq on that subject (as js.WithGetMsgSubject). A missing message
// is js.ErrMsgNotFound.
//
// TOOL_CALLS allows direct gets so that operators can page it, and the
// nats.go client then sends every js.Stream.GetMsg as a direct get, which
// any replica may answer, a lagging one included. A decision (is this call
// still queued? was it acked?) must not read a replica that is behind the
// leader, so toolpool's own reads of TOOL_CALLS go through this function.
func GetMsgFromLeader(ctx context.Context, j js.JetStream, stream string, seq uint64, nextBySubject string) (*js.RawStreamMsg, error) {
	if _, ok := ctx.Deadline(); !ok {
		if d := j.Options().DefaultTimeout; d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
	}
	req, err := json.Marshal(leaderGetRequest{Seq: seq, NextFor: nextBySubject})
	if err != nil {
		return nil, err
	}
	resp, err := j.Conn().RequestWithContext(ctx, apiPrefix(j.Options())+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("jetstream: get message %d of stream %s: %w", seq, stream, err)
	}
	var r leaderGetResponse
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, fmt.Errorf("jetstream: get message %d of stream %s: malformed response: %w", seq, stream, err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == js.JSErrCodeMessageNotFound {
			return nil, js.ErrMsgNotFound
		}
		if r.Error.ErrorCode == js.JSErrCodeStreamNotFound {
			return nil, js.ErrStreamNotFound
		}
		return nil, fmt.Errorf("jetstream: get message %d of stream %s: %w", seq, stream, r.Error)
	}
	if r.Message == nil {
		return nil, fmt.Errorf("jetstream: get message %d of stream %s: %w", seq, stream, js.ErrInvalidJetStreamResponse)
	}
	m := &js.RawStreamMsg{Subject: r.Message.Subject, Sequence: r.Message.Sequence, Data: r.Message.Data, Time: r.Message.Time}
	if len(r.Message.Header) > 0 {
		if m.Header, err = nats.DecodeHeadersMsg(r.Message.Header); err != nil {
			return nil, fmt.Errorf("jetstream: get message %d of stream %s: headers: %w", seq, stream, err)
		}
	}
	return m, nil
}

// leaderGetRequest is the body of $JS.API.STREAM.MSG.GET.<stream>.
type leaderGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
}

// leaderGetResponse is its answer.
type leaderGetResponse struct {
	Error   *js.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// apiPrefix is the prefix of j's API subjects, ending in a dot, as nats.go
// forms it: the domain's, the custom prefix, or "$JS.API.".
func apiPrefix(o js.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		if strings.HasSuffix(o.APIPrefix, ".") {
			return o.APIPrefix
		}
		return o.APIPrefix + "."
	}
	return js.DefaultAPIPrefix
}
