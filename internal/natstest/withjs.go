package natstest

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// WithJS runs f on a short-lived connection of the caller's own to url
// (not one of the pool's), with 5 s for its JetStream requests. It does
// nothing when the server cannot be reached: it is meant for a failed
// test's diagnostics and for look-ups that tolerate a server gone.
func WithJS(url string, f func(context.Context, js.JetStream)) {
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second), nats.NoReconnect())
	if err != nil {
		return
	}
	defer nc.Close()
	j, err := js.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f(ctx, j)
}
