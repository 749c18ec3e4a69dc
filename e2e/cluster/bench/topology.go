package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/toolpool/toolpool/internal/bench"
	"github.com/toolpool/toolpool/jetstream"
)

// The baseline's stream and consumer names, as internal/bench/baseline.go
// gives them.
const (
	rawCallStream   = "BENCH_RAW_CALLS"
	rawResultStream = "BENCH_RAW_RESULTS"
	rawConsumer     = "bench_raw"
)

// topology is where a phase's work happens: the leaders of its streams
// and of its work consumer, and the node each of its connections is on.
// A publish from a connection on a node other than its stream's leader
// crosses a route, and so does every delivery of a consumer led
// elsewhere: the placement moves a phase's figures.
type topology struct {
	CallsLeader    string `json:"calls_leader"`
	ResultsLeader  string `json:"results_leader"`
	ConsumerLeader string `json:"consumer_leader"`
	// ResultConsumers is "name@node" of each consumer of the results
	// stream (the collectors of results: one replica, placed by the
	// server where it chose).
	ResultConsumers []string `json:"result_consumers"`
	// Conns is "connection name@node" of the bench's and the workers'
	// connections.
	Conns []string `json:"conns"`
}

func (t topology) String() string {
	return fmt.Sprintf("leaders: calls %s, results %s, work consumer %s; result consumers: %s; connections: %s",
		t.CallsLeader, t.ResultsLeader, t.ConsumerLeader, strings.Join(t.ResultConsumers, " "), strings.Join(t.Conns, " "))
}

// topologyOf reads phase name's topology (errors leave fields empty: it
// is a description, not a measurement).
func (m *meter) topologyOf(ctx context.Context, name string) topology {
	calls, results, consumer := jetstream.StreamCalls, jetstream.StreamResults, jetstream.ConsumerPrefix+bench.ToolEcho
	if name == bench.PhaseBaseline {
		calls, results, consumer = rawCallStream, rawResultStream, rawConsumer
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var t topology
	if s, err := m.c.js.Stream(ctx, calls); err == nil && s.CachedInfo().Cluster != nil {
		t.CallsLeader = s.CachedInfo().Cluster.Leader
		if cons, err := s.Consumer(ctx, consumer); err == nil && cons.CachedInfo().Cluster != nil {
			t.ConsumerLeader = cons.CachedInfo().Cluster.Leader
		}
	}
	if s, err := m.c.js.Stream(ctx, results); err == nil && s.CachedInfo().Cluster != nil {
		t.ResultsLeader = s.CachedInfo().Cluster.Leader
		l := s.ListConsumers(ctx)
		for info := range l.Info() {
			if info.Cluster != nil {
				t.ResultConsumers = append(t.ResultConsumers, info.Name+"@"+info.Cluster.Leader)
			}
		}
	}
	for _, n := range m.c.nodes {
		for _, conn := range connNames(ctx, n.monitor) {
			if strings.HasPrefix(conn, "toolpool-bench-") || conn == "toolpool-worker" {
				t.Conns = append(t.Conns, strings.TrimPrefix(conn, "toolpool-")+"@"+n.name)
			}
		}
	}
	slices.Sort(t.Conns)
	return t
}

// connNames are the names of the client connections of the node at
// monitor.
func connNames(ctx context.Context, monitor string) []string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+monitor+"/connz?limit=4096", nil)
	if err != nil {
		return nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var cz struct {
		Connections []struct {
			Name string `json:"name"`
		} `json:"connections"`
	}
	if json.NewDecoder(resp.Body).Decode(&cz) != nil {
		return nil
	}
	var names []string
	for _, c := range cz.Connections {
		names = append(names, c.Name)
	}
	return names
}
