package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// pubAcks publishes the dispatcher's calls asynchronously and matches
// their PubAcks, as nats.go's jetstream PublishMsgAsync does, for less per
// publish: nats.go's future makes a copy of the message, a reply token, a
// timer of its own (WithPublishAsyncTimeout), and decodes every PubAck with
// encoding/json (about 19 allocations per publish in all); here a publish
// is its future, its reply subject and the channel the turn waits on, and
// a PubAck of the usual shape is read without encoding/json.
//
// Its outcomes are nats.go's: the same PubAck values and the same errors
// (an API error as *js.APIError, js.ErrNoStreamResponse after the same two
// retries 250 ms apart when no stream answers, js.ErrInvalidJSAck,
// nats.ErrDisconnected for every publish pending when the connection
// starts reconnecting, js.ErrAsyncPublishTimeout for one pending longer
// than PublishAsyncTimeout). The last one, the protection against PubAcks
// lost in a failover, comes from one sweep per dispatcher instead of a
// timer per publish.
type pubAcks struct {
	nc     *nats.Conn
	prefix string // <inbox>.: a publish's reply subject is prefix + its id
	sub    *nats.Subscription
	status chan nats.Status
	next   atomic.Uint64 // ids

	mu      sync.Mutex
	pending map[string]*ackFuture // by id
	stream  string                // the stream name of the last PubAck, shared by the next ones
}

// Retries of a publish no stream answered (nats.go's defaults), and how
// the server says no stream did.
const (
	statusHeader       = "Status"
	noResponders       = "503"
	noResponderRetries = js.DefaultPubRetryAttempts
	noResponderWait    = js.DefaultPubRetryWait
)

// newPubAcks subscribes to the replies of the publishes on nc.
func newPubAcks(nc *nats.Conn) (*pubAcks, error) {
	a := &pubAcks{nc: nc, prefix: nc.NewInbox() + ".", pending: make(map[string]*ackFuture)}
	sub, err := nc.Subscribe(a.prefix+"*", a.handle)
	if err != nil {
		return nil, err
	}
	a.sub = sub
	a.status = nc.StatusChanged(nats.RECONNECTING, nats.CLOSED)
	return a, nil
}

// run fails the pending publishes when the connection starts reconnecting
// and those pending too long, until life ends; then it unsubscribes.
func (a *pubAcks) run(life context.Context) {
	tick := time.NewTicker(PublishAsyncTimeout / 10)
	defer tick.Stop()
	defer a.close()
	for {
		select {
		case <-life.Done():
			return
		case s, ok := <-a.status:
			if !ok || s == nats.CLOSED {
				<-life.Done()
				return
			}
			a.failAll(nats.ErrDisconnected)
		case now := <-tick.C:
			a.expire(now)
		}
	}
}

// close unsubscribes from the replies and the connection's status.
func (a *pubAcks) close() {
	a.nc.RemoveStatusListener(a.status)
	_ = a.sub.Unsubscribe()
}

// publish publishes m with a reply subject of its own and returns the
// future of its PubAck. m itself is not changed.
func (a *pubAcks) publish(m *nats.Msg) (js.PubAckFuture, error) {
	f := &ackFuture{a: a, msg: m, sent: time.Now()}
	var b [64]byte // a reply subject is built here: one allocation, the string
	f.pub = nats.Msg{Subject: m.Subject, Data: m.Data, Header: m.Header,
		Reply: string(strconv.AppendUint(append(b[:0], a.prefix...), a.next.Add(1), 36))}
	f.id = f.pub.Reply[len(a.prefix):]
	a.mu.Lock()
	a.pending[f.id] = f
	a.mu.Unlock()
	if err := a.nc.PublishMsg(&f.pub); err != nil {
		a.mu.Lock()
		delete(a.pending, f.id)
		a.mu.Unlock()
		return nil, err
	}
	return f, nil
}

// handle takes a reply.
func (a *pubAcks) handle(m *nats.Msg) {
	if len(m.Subject) <= len(a.prefix) {
		return
	}
	id := m.Subject[len(a.prefix):]
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.pending[id]
	if f == nil {
		return // answered, timed out or failed by a reconnect before
	}
	if len(m.Data) == 0 && m.Header.Get(statusHeader) == noResponders {
		if f.retries < noResponderRetries {
			f.retries++
			time.AfterFunc(noResponderWait, func() { a.retry(f) })
			return
		}
		delete(a.pending, id)
		f.resolve(js.ErrNoStreamResponse)
		return
	}
	delete(a.pending, id)
	if a.readAck(m.Data, &f.ack) {
		f.resolve(nil)
		return
	}
	var r pubAckResponse
	switch {
	case json.Unmarshal(m.Data, &r) != nil:
		f.resolve(js.ErrInvalidJSAck)
	case r.Error != nil:
		f.resolve(r.Error)
	case r.PubAck == nil || r.PubAck.Stream == "":
		f.resolve(js.ErrInvalidJSAck)
	default:
		f.ack = *r.PubAck
		f.resolve(nil)
	}
}

// pubAckResponse is a PubAck or an API error, as JetStream answers a
// publish (nats.go's own type is not exported).
type pubAckResponse struct {
	Error *js.APIError `json:"error,omitempty"`
	*js.PubAck
}

// retry publishes f again, with the same reply subject, if it is still
// pending (a publish no stream answered).
func (a *pubAcks) retry(f *ackFuture) {
	a.mu.Lock()
	pending := a.pending[f.id] == f
	a.mu.Unlock()
	if !pending {
		return
	}
	if err := a.nc.PublishMsg(&f.pub); err != nil {
		a.fail(f, err)
	}
}

// fail resolves f with err if it is still pending.
func (a *pubAcks) fail(f *ackFuture, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending[f.id] == f {
		delete(a.pending, f.id)
		f.resolve(err)
	}
}

// failAll resolves every pending publish with err.
func (a *pubAcks) failAll(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, f := range a.pending {
		delete(a.pending, id)
		f.resolve(err)
	}
}

// expire fails the publishes pending for PublishAsyncTimeout or longer.
func (a *pubAcks) expire(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, f := range a.pending {
		if now.Sub(f.sent) >= PublishAsyncTimeout {
			delete(a.pending, id)
			f.resolve(js.ErrAsyncPublishTimeout)
		}
	}
}

// readAck reads a PubAck of the shape JetStream writes for a stored
// message, {"stream":"S","seq":N} with an optional ,"duplicate":true, into
// ack and reports whether it could; anything else (an error, a domain,
// escapes, fields it does not know) is left to encoding/json. Called with
// a.mu held.
func (a *pubAcks) readAck(d []byte, ack *js.PubAck) bool {
	rest, ok := bytes.CutPrefix(d, []byte(`{"stream":"`))
	if !ok {
		return false
	}
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return false
	}
	name := rest[:end]
	rest, ok = bytes.CutPrefix(rest[end+1:], []byte(`,"seq":`))
	if !ok {
		return false
	}
	n := 0
	for n < len(rest) && n < 20 && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	seq, err := strconv.ParseUint(string(rest[:n]), 10, 64)
	if n == 0 || err != nil {
		return false
	}
	dup := false
	switch string(rest[n:]) {
	case "}":
	case `,"duplicate":true}`:
		dup = true
	default:
		return false
	}
	if string(name) != a.stream {
		a.stream = string(name)
	}
	*ack = js.PubAck{Stream: a.stream, Sequence: seq, Duplicate: dup}
	return true
}

// ackFuture is the js.PubAckFuture of one publish of pubAcks. Its fields
// after a are guarded by a.mu.
type ackFuture struct {
	a       *pubAcks
	msg     *nats.Msg // as given to publish
	pub     nats.Msg  // as published: msg's subject, data and header, the reply subject
	id      string
	sent    time.Time
	retries int

	done bool
	ack  js.PubAck
	err  error
	okC  chan *js.PubAck // made on demand, as nats.go does
	errC chan error
}

// resolve settles f with its PubAck (err nil) or err. Called with f.a.mu
// held, once.
func (f *ackFuture) resolve(err error) {
	f.done, f.err = true, err
	if err != nil {
		if f.errC != nil {
			f.errC <- err
		}
		return
	}
	if f.okC != nil {
		f.okC <- &f.ack
	}
}

// Ok returns a channel that receives the PubAck once it arrives.
func (f *ackFuture) Ok() <-chan *js.PubAck {
	f.a.mu.Lock()
	defer f.a.mu.Unlock()
	if f.okC == nil {
		f.okC = make(chan *js.PubAck, 1)
		if f.done && f.err == nil {
			f.okC <- &f.ack
		}
	}
	return f.okC
}

// Err returns a channel that receives the publish's error, if it fails.
func (f *ackFuture) Err() <-chan error {
	f.a.mu.Lock()
	defer f.a.mu.Unlock()
	if f.errC == nil {
		f.errC = make(chan error, 1)
		if f.done && f.err != nil {
			f.errC <- f.err
		}
	}
	return f.errC
}

// Msg returns the message given to publish.
func (f *ackFuture) Msg() *nats.Msg { return f.msg }
