package bench

// The raw-JetStream baseline: the pool's path with nothing but nats.go.
// This file must not import toolpool packages: the baseline is what the
// same server and client library do on their own, so the pool's figures
// can be read as ratios of it. The harness hands it the stream and
// consumer configurations (the pool's, renamed) and the message sizes.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// rawConfig is what the baseline needs to know.
type rawConfig struct {
	callStream, resultStream js.StreamConfig
	consumer                 js.ConsumerConfig
	callSubject              string // where calls are published
	resultSubject            string // where results are published and collected
	callSize, resultSize     int    // message bodies, as large as the pool's envelopes
	traceparent              string // a call's traceparent header, as the pool's calls carry
	executors                int    // goroutines executing calls
	pullMax                  int    // PullMaxMessages
	work                     time.Duration
	turnTimeout              time.Duration
}

// rawTarget runs the baseline: callers publish calls with Nats-Msg-Id
// (async) and wait for their PubAcks; a durable pull consumer (Consume)
// feeds executors that publish a result with Nats-Msg-Id, wait for its
// PubAck and ack the call; an ordered consumer collects the results and
// hands each to its waiting caller.
type rawTarget struct {
	cfg        rawConfig
	callerJS   js.JetStream
	workerJS   js.JetStream
	callBody   []byte
	resultBody []byte

	mu      sync.Mutex
	waiting map[string]chan struct{}

	workCC    js.ConsumeContext
	resultCC  js.ConsumeContext
	msgs      chan js.Msg
	executors sync.WaitGroup
}

// startRaw creates the baseline's streams (replacing any left over) and
// starts its executors and its result collector.
func startRaw(ctx context.Context, cfg rawConfig, callerNC, workerNC *nats.Conn) (*rawTarget, error) {
	cj, err := js.New(callerNC)
	if err != nil {
		return nil, err
	}
	wj, err := js.New(workerNC)
	if err != nil {
		return nil, err
	}
	r := &rawTarget{
		cfg: cfg, callerJS: cj, workerJS: wj,
		callBody:   filler(cfg.callSize),
		resultBody: filler(cfg.resultSize),
		waiting:    make(map[string]chan struct{}),
		msgs:       make(chan js.Msg, cfg.pullMax),
	}
	for _, sc := range []js.StreamConfig{cfg.callStream, cfg.resultStream} {
		if err := cj.DeleteStream(ctx, sc.Name); err != nil && !errors.Is(err, js.ErrStreamNotFound) {
			return nil, fmt.Errorf("baseline: delete stream %s: %w", sc.Name, err)
		}
		if _, err := cj.CreateStream(ctx, sc); err != nil {
			return nil, fmt.Errorf("baseline: create stream %s: %w", sc.Name, err)
		}
	}
	if err := r.consumeResults(ctx, callerNC.ConnectedServerName()); err != nil {
		return nil, err
	}
	calls, err := wj.CreateOrUpdateConsumer(ctx, cfg.callStream.Name, cfg.consumer)
	if err != nil {
		r.stop(context.Background())
		return nil, fmt.Errorf("baseline: call consumer: %w", err)
	}
	for range cfg.executors {
		r.executors.Go(r.execute)
	}
	if r.workCC, err = calls.Consume(func(m js.Msg) { r.msgs <- m }, js.PullMaxMessages(cfg.pullMax)); err != nil {
		r.stop(context.Background())
		return nil, fmt.Errorf("baseline: consume calls: %w", err)
	}
	return r, nil
}

// placeTries bounds the result consumers the baseline makes to have one
// on the caller's server, as the pool's dispatcher does.
const placeTries = 20

// consumeResults starts the result collector: an ordered consumer, made
// again until the cluster places it on here, the server the caller is
// connected to (at most placeTries times), when the result stream has a
// replica there. The dispatcher places its result consumer so; a
// consumer elsewhere sends every result across a route once more, and
// the comparison would depend on where each side's landed.
func (r *rawTarget) consumeResults(ctx context.Context, here string) error {
	var peers []string
	if s, err := r.callerJS.Stream(ctx, r.cfg.resultStream.Name); err == nil {
		if cl := s.CachedInfo().Cluster; cl != nil {
			peers = append(peers, cl.Leader)
			for _, p := range cl.Replicas {
				peers = append(peers, p.Name)
			}
		}
	}
	tries := 1
	if here != "" && slices.Contains(peers, here) {
		tries = placeTries
	}
	for i := range tries {
		results, err := r.callerJS.OrderedConsumer(ctx, r.cfg.resultStream.Name, js.OrderedConsumerConfig{
			FilterSubjects: []string{r.cfg.resultSubject},
			DeliverPolicy:  js.DeliverNewPolicy,
		})
		if err != nil {
			return fmt.Errorf("baseline: result consumer: %w", err)
		}
		if r.resultCC, err = results.Consume(r.collect); err != nil {
			return fmt.Errorf("baseline: consume results: %w", err)
		}
		info, err := results.Info(ctx)
		if err != nil || info.Cluster == nil || info.Cluster.Leader == here || i == tries-1 {
			return nil
		}
		r.resultCC.Stop()
		<-r.resultCC.Closed()
		_ = r.callerJS.DeleteConsumer(ctx, r.cfg.resultStream.Name, info.Name)
	}
	return nil
}

func filler(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return b
}

// execute runs calls until the message channel closes.
func (r *rawTarget) execute() {
	for m := range r.msgs {
		if r.cfg.work > 0 {
			time.Sleep(r.cfg.work)
		}
		id := m.Headers().Get(nats.MsgIdHdr)
		paf, err := r.workerJS.PublishMsgAsync(&nats.Msg{
			Subject: r.cfg.resultSubject,
			Data:    r.resultBody,
			Header:  nats.Header{nats.MsgIdHdr: []string{id}},
		})
		if err != nil {
			_ = m.Nak()
			continue
		}
		select {
		case <-paf.Ok():
			_ = m.Ack()
		case <-paf.Err():
			_ = m.Nak()
		}
	}
}

// collect hands a result to its caller.
func (r *rawTarget) collect(m js.Msg) {
	id := m.Headers().Get(nats.MsgIdHdr)
	r.mu.Lock()
	ch, ok := r.waiting[id]
	delete(r.waiting, id)
	r.mu.Unlock()
	if ok {
		ch <- struct{}{}
	}
}

// turn publishes k calls, waits for their PubAcks, then for their results.
func (r *rawTarget) turn(ctx context.Context, a *agent, seq uint64, k int) {
	ch := make(chan struct{}, k)
	ids := a.ids[:0]
	r.mu.Lock()
	for i := range k {
		id := a.prefix + strconv.FormatUint(seq+uint64(i), 10)
		ids = append(ids, id)
		r.waiting[id] = ch
	}
	r.mu.Unlock()
	a.ids = ids
	pafs := a.pafs[:0]
	for _, id := range ids {
		paf, err := r.callerJS.PublishMsgAsync(&nats.Msg{
			Subject: r.cfg.callSubject,
			Data:    r.callBody,
			Header:  nats.Header{nats.MsgIdHdr: []string{id}, envelope.HeaderTraceparent: []string{r.cfg.traceparent}},
		})
		if err != nil {
			r.abandon(a, ids, "unavailable")
			return
		}
		pafs = append(pafs, paf)
	}
	a.pafs = pafs
	timer := time.NewTimer(r.cfg.turnTimeout)
	defer timer.Stop()
	for _, paf := range pafs {
		select {
		case <-paf.Ok():
		case <-paf.Err():
			r.abandon(a, ids, "unavailable")
			return
		case <-timer.C:
			r.abandon(a, ids, "timeout")
			return
		case <-ctx.Done():
			r.abandon(a, ids, "cancelled")
			return
		}
	}
	for range k {
		select {
		case <-ch:
		case <-timer.C:
			r.abandon(a, ids, "timeout")
			return
		case <-ctx.Done():
			r.abandon(a, ids, "cancelled")
			return
		}
	}
	a.calls += uint64(k)
	a.attempts += uint64(k)
}

// abandon stops waiting for ids and counts the turn's calls as failed.
func (r *rawTarget) abandon(a *agent, ids []string, why string) {
	r.mu.Lock()
	for _, id := range ids {
		delete(r.waiting, id)
	}
	r.mu.Unlock()
	a.calls += uint64(len(ids))
	a.fail(why, len(ids))
}

// stop stops the consumers and the executors and deletes the streams.
func (r *rawTarget) stop(ctx context.Context) {
	if r.workCC != nil {
		r.workCC.Stop()
		<-r.workCC.Closed()
	}
	if r.resultCC != nil {
		r.resultCC.Stop()
		<-r.resultCC.Closed()
	}
	close(r.msgs)
	r.executors.Wait()
	for _, sc := range []js.StreamConfig{r.cfg.callStream, r.cfg.resultStream} {
		_ = r.callerJS.DeleteStream(ctx, sc.Name)
	}
}
