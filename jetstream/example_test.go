package jetstream_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/infra/embedded"
	"github.com/toolpool/toolpool/jetstream"
)

// An embedded server, the streams, and one tool's consumer.
func Example() {
	dataDir, err := os.MkdirTemp("", "toolpool-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dataDir)

	srv, err := embedded.Start(embedded.Options{
		Listen:  "127.0.0.1:0", // a free port; the default is 127.0.0.1:4222
		DataDir: dataDir,
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()

	nc, err := jetstream.Connect(jetstream.ConnectOptions{URL: srv.ClientURL(), Name: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	j, err := js.New(nc)
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := jetstream.Provision(ctx, j, jetstream.Config{}); err != nil {
		fmt.Println(err)
		return
	}
	c, err := jetstream.EnsureConsumer(ctx, j, jetstream.ConsumerSpec{
		Tool: "web_search", Timeout: 10 * time.Second, MaxAttempts: 3, Concurrency: 20,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := c.CachedInfo().Config
	fmt.Println(cfg.Durable, cfg.FilterSubject)
	fmt.Println("ack wait", cfg.AckWait, "max deliver", cfg.MaxDeliver, "max ack pending", cfg.MaxAckPending)
	// Output:
	// tool_web_search tools.call.web_search
	// ack wait 20s max deliver 5 max ack pending 20
}
