package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/bench"
	"github.com/toolpool/toolpool/jetstream"
)

// The placements of --placement.
const (
	// placementOneNode: every connection, and the leaders of both
	// sides' streams and work consumers, on the first node, so the two
	// sides run on the same layout and the routes carry replication only.
	placementOneNode = "one-node"
	// placementRandom: connections to a node picked at random, leaders
	// where they were elected, as a deployment runs; each phase's layout
	// is drawn anew (the topology lines say which it got).
	placementRandom = "random"
)

// phaseNames are the streams and the work consumer of phase name.
func phaseNames(name string) (calls, results, consumer string) {
	if name == bench.PhaseBaseline {
		return rawCallStream, rawResultStream, rawConsumer
	}
	return jetstream.StreamCalls, jetstream.StreamResults, jetstream.ConsumerPrefix + bench.ToolEcho
}

// place moves the leaders of phase name's streams and work consumer to
// server, then waits until a worker pulls from the consumer again (its
// pull requests ended with the old leader).
func (m *meter) place(ctx context.Context, name, server string) error {
	calls, results, consumer := phaseNames(name)
	groups := []struct {
		what, subject string
		leader        func(context.Context) (string, error)
	}{
		{"stream " + calls, "$JS.API.STREAM.LEADER.STEPDOWN." + calls, func(ctx context.Context) (string, error) { return m.streamLeader(ctx, calls) }},
		{"stream " + results, "$JS.API.STREAM.LEADER.STEPDOWN." + results, func(ctx context.Context) (string, error) { return m.streamLeader(ctx, results) }},
		{"consumer " + consumer, "$JS.API.CONSUMER.LEADER.STEPDOWN." + calls + "." + consumer, func(ctx context.Context) (string, error) {
			info, err := m.consumerInfo(ctx, calls, consumer)
			if err != nil || info.Cluster == nil {
				return "", err
			}
			return info.Cluster.Leader, nil
		}},
	}
	for _, g := range groups {
		if err := m.moveLeader(ctx, g.what, g.subject, server, g.leader); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := m.consumerInfo(ctx, calls, consumer)
		if err == nil && info.NumWaiting > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no pull request on consumer %s 30 s after its leader moved: %v", consumer, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// moveLeader asks the group's leader to step down in favour of server
// until server leads it, up to 30 s.
func (m *meter) moveLeader(ctx context.Context, what, subject, server string, leader func(context.Context) (string, error)) error {
	deadline := time.Now().Add(30 * time.Second)
	body := fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, server)
	for {
		cur, err := leader(ctx)
		if err == nil && cur == server {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: leader %q, not %s, 30 s after asking (%v)", what, cur, server, err)
		}
		if err == nil && cur != "" {
			msg, err := m.c.nc.RequestWithContext(ctx, subject, body)
			if err != nil {
				return fmt.Errorf("%s: step down: %w", what, err)
			}
			var resp struct {
				Error *struct {
					Description string `json:"description"`
				} `json:"error"`
			}
			if json.Unmarshal(msg.Data, &resp) == nil && resp.Error != nil {
				return fmt.Errorf("%s: step down: %s", what, resp.Error.Description)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (m *meter) streamLeader(ctx context.Context, name string) (string, error) {
	s, err := m.c.js.Stream(ctx, name)
	if err != nil {
		return "", err
	}
	if c := s.CachedInfo().Cluster; c != nil {
		return c.Leader, nil
	}
	return "", errors.New("no cluster information")
}

func (m *meter) consumerInfo(ctx context.Context, stream, name string) (*js.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cons, err := m.c.js.Consumer(ctx, stream, name)
	if err != nil {
		return nil, err
	}
	return cons.Info(ctx)
}
