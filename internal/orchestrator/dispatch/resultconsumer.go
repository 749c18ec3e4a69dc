package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/jetstream"
)

// Result consumer settings.
const (
	// resultsHeartbeat is the idle heartbeat of the result pulls: two missed
	// ones tell the dispatcher its consumer or connection is gone.
	resultsHeartbeat = time.Second
	// resultsExpiry is how long one result pull waits at the server.
	resultsExpiry = 10 * time.Second
	// resultsCreateWait bounds making a new result consumer (milliseconds
	// normally). A cluster that placed it on a node that just died never
	// answers: the next try, under a new name, is placed anew.
	resultsCreateWait = 2 * time.Second
	// resultsDeleteWait bounds deleting a replaced result consumer.
	resultsDeleteWait = 5 * time.Second
	// resultsPlaceTries and resultsPlaceWithin bound the consumers made to
	// have one on the server the connection is on (see local): each miss
	// costs a create and a delete, a few milliseconds on a healthy
	// cluster. With three peers, 20 tries miss with a chance of (2/3)^20,
	// about 1 in 3,300.
	resultsPlaceTries  = 20
	resultsPlaceWithin = time.Second
)

// ResultConsumer is a consumer of the results published for one instance
// (tools.result.<instance>.>), from a stream sequence on: the dispatcher
// takes its calls' results with one (and makes a new one whenever it stops
// delivering), and dlq's replay waits for its replayed calls' results with
// another.
//
// It is a plain ephemeral pull consumer, not nats.go's ordered consumer.
// The ordered consumer makes itself again after a failure on its own, but
// retries under one name, without bound, holding a lock that its Info and
// Stop also need. When the cluster had placed that name on the node that
// had just died, every retry was an update of a consumer on a dead node,
// and the dispatcher stayed blocked until the node came back (three
// minutes in a CI run). Here every request is bounded by a context, every
// new consumer has a new name, and the caller decides when to start over.
type ResultConsumer struct {
	js   js.JetStream
	name string
	log  *slog.Logger
	cons js.Consumer
	cc   js.ConsumeContext
}

// ResultConsumerConfig configures ConsumeResults.
type ResultConsumerConfig struct {
	// Name is the consumer's name, new for each consumer. Required.
	Name string
	// Instance is the instance whose results are consumed
	// (tools.result.<Instance>.>). Required.
	Instance string
	// From is the first stream sequence delivered. Default 0: after the
	// last message TOOL_RESULTS holds now.
	From uint64
	// Handler gets each result message. Required.
	Handler js.MessageHandler
	// OnError gets the errors of the pulls: a consumer deleted or gone
	// (js.ErrConsumerDeleted, js.ErrConsumerNotFound), two heartbeats
	// missed (js.ErrNoHeartbeat), no responders. Default: ignored.
	OnError func(error)
	// Logger logs, at debug level, a consumer that could not be deleted.
	// Default: slog.Default().
	Logger *slog.Logger
}

// ConsumeResults makes a result consumer as cfg says and starts pulling
// from it. The consumer has one replica (see jetstream.ResultConsumerConfig):
// when its node dies, the pulls miss their heartbeats (OnError) and the
// caller makes a new one elsewhere, under a new name.
//
// In a cluster, the consumer is placed on the server the connection is on
// when TOOL_RESULTS has a replica there: the cluster places a one-replica
// consumer on one of the stream's servers at random, and one elsewhere
// sends every result across a route once more. ConsumeResults makes it
// again, under cfg.Name with "-1", "-2", … appended (Name says which), until
// it lands there, at most resultsPlaceTries times within
// resultsPlaceWithin; then it keeps the last one wherever it is.
func ConsumeResults(ctx context.Context, j js.JetStream, cfg ResultConsumerConfig) (*ResultConsumer, error) {
	if cfg.Name == "" || cfg.Instance == "" || cfg.Handler == nil {
		return nil, errors.New("dispatch: ResultConsumerConfig: Name, Instance and Handler are required")
	}
	c := &ResultConsumer{js: j, name: cfg.Name, log: cmp.Or(cfg.Logger, slog.Default())}
	if cfg.From == 0 {
		s, err := j.Stream(ctx, jetstream.StreamResults)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", jetstream.StreamResults, err)
		}
		cfg.From = s.CachedInfo().State.LastSeq + 1
	}
	ccfg := jetstream.ResultConsumerConfig(cfg.Name, cfg.Instance, cfg.From)
	cons, err := j.CreateConsumer(ctx, jetstream.StreamResults, ccfg)
	if errors.Is(err, js.ErrConsumerExists) {
		// Left by a process of the same instance that was killed (a
		// replica restarted under its fixed --instance) until its
		// inactivity threshold: the instance is this process's now.
		c.log.Info("replacing a result consumer left by an earlier process of this instance", slog.String("consumer", cfg.Name))
		c.Delete()
		cons, err = j.CreateConsumer(ctx, jetstream.StreamResults, ccfg)
	}
	if err != nil {
		// The server may have placed it on a node that is down (it has not
		// noticed yet) and never answer: forget that one, the next try
		// uses a new name and gets a new placement.
		go c.Delete()
		return nil, fmt.Errorf("result consumer on %s: %w", jetstream.StreamResults, err)
	}
	cons = c.local(ctx, cons, ccfg)
	c.cons = cons
	onError := cfg.OnError
	if onError == nil {
		onError = func(error) {}
	}
	c.cc, err = cons.Consume(cfg.Handler,
		js.PullExpiry(resultsExpiry), js.PullHeartbeat(resultsHeartbeat),
		js.ConsumeErrHandler(func(_ js.ConsumeContext, err error) { onError(err) }))
	if err != nil {
		c.Delete()
		return nil, fmt.Errorf("consume results: %w", err)
	}
	return c, nil
}

// local returns cons, or a consumer made again like it under a new name,
// placed on the server the connection is on; see ConsumeResults. The
// consumers it does not keep are deleted in the background. c.name is the
// returned consumer's.
func (c *ResultConsumer) local(ctx context.Context, cons js.Consumer, ccfg js.ConsumerConfig) js.Consumer {
	here := c.js.Conn().ConnectedServerName()
	at := placedOn(cons)
	if here == "" || at == "" || at == here {
		return cons
	}
	// Every request of the placement within resultsPlaceWithin: a create
	// the cluster does not answer must not hold up the consumer there is.
	ctx, cancel := context.WithTimeout(ctx, resultsPlaceWithin)
	defer cancel()
	if !c.resultsOn(ctx, here) {
		return cons
	}
	base := ccfg.Name
	var dropped []string
	tries := 1
	for ; at != here && tries < resultsPlaceTries && ctx.Err() == nil; tries++ {
		ccfg.Name = fmt.Sprintf("%s-%d", base, tries)
		next, err := c.js.CreateConsumer(ctx, jetstream.StreamResults, ccfg)
		if err != nil {
			// Placed on a node that is down, perhaps: forget it, keep the
			// one that answered.
			dropped = append(dropped, ccfg.Name)
			break
		}
		dropped = append(dropped, c.name)
		cons, c.name, at = next, ccfg.Name, placedOn(next)
	}
	if at == here {
		c.log.Debug("result consumer placed on the connection's server",
			slog.String("consumer", c.name), slog.String("server", here), slog.Int("made", tries))
	} else {
		c.log.Info("result consumer kept on another server than the connection's: each result crosses a route once more",
			slog.String("consumer", c.name), slog.String("server", at), slog.String("connection_server", here), slog.Int("made", tries))
	}
	if len(dropped) > 0 {
		go func() {
			for _, name := range dropped {
				(&ResultConsumer{js: c.js, name: name, log: c.log}).Delete()
			}
		}()
	}
	return cons
}

// placedOn is the server that serves cons, "" when its info does not say.
func placedOn(cons js.Consumer) string {
	if ci := cons.CachedInfo(); ci != nil && ci.Cluster != nil {
		return ci.Cluster.Leader
	}
	return ""
}

// resultsOn reports whether TOOL_RESULTS has a replica on server, where a
// result consumer can be placed; false when its info cannot be had.
func (c *ResultConsumer) resultsOn(ctx context.Context, server string) bool {
	s, err := c.js.Stream(ctx, jetstream.StreamResults)
	if err != nil {
		return false
	}
	cl := s.CachedInfo().Cluster
	if cl == nil {
		return false
	}
	if cl.Leader == server {
		return true
	}
	for _, r := range cl.Replicas {
		if r != nil && r.Name == server {
			return true
		}
	}
	return false
}

// Name is the consumer's name: ResultConsumerConfig.Name, or with a
// suffix when it was made again to be placed on the connection's server.
func (c *ResultConsumer) Name() string { return c.name }

// Info asks the server about the consumer.
func (c *ResultConsumer) Info(ctx context.Context) (*js.ConsumerInfo, error) { return c.cons.Info(ctx) }

// Stop stops pulling; Closed is closed once the handler is done. It does
// not delete the consumer (Delete does).
func (c *ResultConsumer) Stop() { c.cc.Stop() }

// Closed is closed when the consumer stopped delivering after Stop.
func (c *ResultConsumer) Closed() <-chan struct{} { return c.cc.Closed() }

// Delete deletes the consumer rather than leaving it to its inactivity
// threshold. It is best effort, bounded to a few seconds: a consumer that
// cannot be deleted now goes away on its own.
func (c *ResultConsumer) Delete() {
	ctx, cancel := context.WithTimeout(context.Background(), resultsDeleteWait)
	defer cancel()
	if err := c.js.DeleteConsumer(ctx, jetstream.StreamResults, c.name); err != nil && !errors.Is(err, js.ErrConsumerNotFound) {
		c.log.Debug("deleting a result consumer", slog.String("consumer", c.name), slog.Any("error", err))
	}
}
