package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/dlq"
	"github.com/toolpool/toolpool/pkg/worker"
)

// startDeadLetters opens the attempts bucket (for the in-process workers
// and the dead letters) and starts the poison watcher, which sets aside
// the calls that kill every worker running them. The history is best
// effort: when its bucket cannot be opened, the pool runs without it (nil).
// onPoison (the metrics) is called for each call the watcher sets aside.
func startDeadLetters(ctx context.Context, nc *nats.Conn, j js.JetStream, ttl time.Duration, replicas int, onPoison func(dlq.PoisonCall), log *slog.Logger) (worker.History, *dlq.PoisonWatcher, error) {
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var history worker.History
	pcfg := dlq.PoisonConfig{Conn: nc, JetStream: j, Logger: log, OnPoison: onPoison}
	if h, err := dlq.OpenHistory(octx, j, dlq.HistoryConfig{TTL: ttl, Replicas: replicas}); err != nil {
		log.Warn("no attempt history: dead letters will carry only their last attempt", "err", err)
	} else {
		history, pcfg.History = h, h
	}
	poison, err := dlq.NewPoisonWatcher(pcfg)
	if err == nil {
		err = poison.Start(octx)
	}
	if err != nil {
		return nil, nil, err
	}
	return history, poison, nil
}
