package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
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

// How the server says that nothing answers a request (nats.go's request
// reads it so, as ErrNoResponders): a reply with no data and this status.
const (
	statusHeader = "Status"
	noResponders = "503"
)

// publishSync publishes m and waits for its PubAck, as JetStream's
// PublishMsg does (the same retries after "no responders", the same
// errors), on nc. A PubAck that says the message is stored is recognised on
// its text (pubAckStored), without decoding it; anything else is decoded
// as nats.go does.
func publishSync(ctx context.Context, nc *nats.Conn, m *nats.Msg) error {
	return publishOutcome(requestRetrying(ctx, func() (*nats.Msg, error) { return nc.RequestMsgWithContext(ctx, m) }))
}

// requestRetrying makes request and, while it finds no responders (no
// stream: a leader being elected), makes it again after
// publishRetryWait, up to publishRetryAttempts more times, as nats.go's
// JetStream publish does. A context that ends meanwhile ends it with its
// error.
func requestRetrying(ctx context.Context, request func() (*nats.Msg, error)) (*nats.Msg, error) {
	resp, err := request()
	for r := 0; errors.Is(err, nats.ErrNoResponders) && r < publishRetryAttempts; r++ {
		t := time.NewTimer(publishRetryWait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if err = ctx.Err(); err == nil {
			resp, err = request()
		}
	}
	return resp, err
}

// publishOutcome is a publish's error from its request's reply and error,
// as nats.go's JetStream publish gives it.
func publishOutcome(resp *nats.Msg, err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return js.ErrNoStreamResponse
	case err != nil:
		return err
	}
	return pubAckError(resp.Data)
}

// pubAckError returns the error of the PubAck data, as nats.go's
// JetStream publish reads it: nil when it says the message is stored
// (recognised on its text by pubAckStored, else decoded), the API error of
// the stream, or js.ErrInvalidJSAck.
func pubAckError(data []byte) error {
	if pubAckStored(data) {
		return nil
	}
	var ack struct {
		Error  *js.APIError `json:"error,omitempty"`
		Stream string       `json:"stream"`
	}
	if err := json.Unmarshal(data, &ack); err != nil {
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

// resultAcks publishes a started worker's results and matches their
// PubAcks itself, on one reply subscription per worker: a publish is a
// reply subject of its own (prefix + a counter), an entry in pending and a
// reused waiter, where nats.go's request (RequestMsgWithContext) makes a
// reply token, a channel and a map entry per request and wakes the caller
// through its own response mux. Its outcomes are publishSync's, which are
// nats.go's: the PubAck read as publishSync reads it, the same retries
// after "no responders", ctx's error when ctx ends first (a publish keeps
// waiting through a reconnect, as a request does: the reply subscription
// is made again, and its PubAck may still come), and
// nats.ErrConnectionClosed for those pending when the connection closes
// (nats.go fails its pending requests so; it fails them with
// ErrDisconnected only on a ForceReconnect, which this project does not
// make).
type resultAcks struct {
	nc     *nats.Conn
	prefix string // <inbox>.: a publish's reply subject is prefix + its id in base 36
	sub    *nats.Subscription
	status chan nats.Status
	next   atomic.Uint64 // ids

	mu      sync.Mutex
	pending map[uint64]*ackWaiter // by id
	closed  bool                  // set by close: publishes go through publishSync
}

// ackWaiter is a publish of resultAcks waiting for its reply: the reply
// handler sends the reply, or the error that ended the wait, on done
// (buffered: the send never blocks, and is made with resultAcks.mu held).
type ackWaiter struct {
	done chan ackReply
	pub  nats.Msg // the message as published, with its reply subject
	buf  [64]byte // the reply subject is built here
}

// ackReply is what ends a waiter's wait: a reply, or an error.
type ackReply struct {
	msg *nats.Msg
	err error
}

// ackWaiters holds the waiters not in use.
var ackWaiters = sync.Pool{New: func() any { return &ackWaiter{done: make(chan ackReply, 1)} }}

// newResultAcks subscribes to the replies of the result publishes on nc,
// and to its closing.
func newResultAcks(nc *nats.Conn) (*resultAcks, error) {
	a := &resultAcks{nc: nc, prefix: nc.NewInbox() + ".", pending: make(map[uint64]*ackWaiter)}
	sub, err := nc.Subscribe(a.prefix+"*", a.handle)
	if err != nil {
		return nil, err
	}
	a.sub = sub
	a.status = nc.StatusChanged(nats.CLOSED)
	return a, nil
}

// run waits until done is closed, or the connection closes (then it fails
// the pending publishes with nats.ErrConnectionClosed); then it closes a.
func (a *resultAcks) run(done <-chan struct{}) {
	defer a.close()
	select {
	case <-done:
	case <-a.status:
		a.failAll(nats.ErrConnectionClosed)
	}
}

// close unsubscribes: the publishes from then on go through publishSync.
func (a *resultAcks) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.nc.RemoveStatusListener(a.status)
	_ = a.sub.Unsubscribe()
}

// publish publishes m and waits for its PubAck, as publishSync does.
func (a *resultAcks) publish(ctx context.Context, m *nats.Msg) error {
	if err := ctx.Err(); err != nil {
		return err // as nats.go's request: before anything else
	}
	w := ackWaiters.Get().(*ackWaiter)
	resp, err := requestRetrying(ctx, func() (*nats.Msg, error) { return a.request(ctx, w, m) })
	ackWaiters.Put(w)
	return publishOutcome(resp, err)
}

// request publishes m with a reply subject of its own and waits, with w,
// for its reply: one request of nats.go's RequestMsgWithContext. w's
// channel is empty when it returns.
func (a *resultAcks) request(ctx context.Context, w *ackWaiter, m *nats.Msg) (*nats.Msg, error) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return a.nc.RequestMsgWithContext(ctx, m) // after Stop: as publishSync
	}
	id := a.next.Add(1) // with a.mu held: an id is pending once counted
	a.pending[id] = w
	a.mu.Unlock()
	w.pub = nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data,
		Reply: string(strconv.AppendUint(append(w.buf[:0], a.prefix...), id, 36))}
	err := a.nc.PublishMsg(&w.pub)
	w.pub = nats.Msg{} // the client holds on to nothing of it
	if err != nil {
		a.forget(id, w)
		return nil, err
	}
	select {
	case r := <-w.done:
		if r.err == nil && len(r.msg.Data) == 0 && r.msg.Header.Get(statusHeader) == noResponders {
			return nil, nats.ErrNoResponders
		}
		return r.msg, r.err
	case <-ctx.Done():
		a.forget(id, w)
		return nil, ctx.Err()
	}
}

// forget takes w, waiting as id, out of the pending publishes; if a reply
// or an error came first, it takes it from w's channel.
func (a *resultAcks) forget(id uint64, w *ackWaiter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending[id] == w {
		delete(a.pending, id)
		return
	}
	<-w.done // sent with a.mu held, when it was taken out
}

// handle takes a reply.
func (a *resultAcks) handle(m *nats.Msg) {
	if len(m.Subject) <= len(a.prefix) {
		return
	}
	id, err := strconv.ParseUint(m.Subject[len(a.prefix):], 36, 64)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.pending[id]; w != nil {
		delete(a.pending, id)
		w.done <- ackReply{msg: m}
	}
}

// failAll ends every pending publish with err.
func (a *resultAcks) failAll(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, w := range a.pending {
		delete(a.pending, id)
		w.done <- ackReply{err: err}
	}
}
