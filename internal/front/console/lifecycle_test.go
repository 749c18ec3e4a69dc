package console_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/front/console"
	"github.com/toolpool/toolpool/internal/infra/startstop"
	"github.com/toolpool/toolpool/internal/natstest"
)

// A console starts once, and not again after Stop; Stop before Start
// returns at once; Stopped is closed once Stop has returned.
func TestStartStop(t *testing.T) {
	t.Parallel()
	_, nc, j := natstest.StartProvisioned(t)
	newConsole := func() *console.Console {
		c, err := console.New(console.Config{Conn: nc, JetStream: j, Loopback: true, Logger: natstest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c := newConsole()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err == nil || err.Error() != "console: already started" || !errors.Is(err, startstop.ErrStarted) {
		t.Errorf("a second Start: %v", err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	select {
	case <-c.Stopped():
	default:
		t.Error("Stopped is open after Stop")
	}
	if err := c.Start(ctx); err == nil {
		t.Error("Start after Stop succeeded")
	}

	never := newConsole()
	if err := never.Stop(ctx); err != nil {
		t.Errorf("Stop before Start: %v", err)
	}
	<-never.Stopped()
}
