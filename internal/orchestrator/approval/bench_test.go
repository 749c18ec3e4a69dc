package approval_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
)

// BenchmarkHold: recording a new held call (one KV create), and the same
// call sent again (the create refused, then a read).
func BenchmarkHold(b *testing.B) {
	srv := natstest.Start(b)
	s := startB(b, srv.ClientURL())
	ctx := context.Background()
	b.Run("new", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := s.Hold(ctx, call(fmt.Sprintf(`{"n": %d}`, i), time.Hour)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("again", func(b *testing.B) {
		c := call(`{"again": true}`, time.Hour)
		for b.Loop() {
			if _, err := s.Hold(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecisionReachesWait: from Decide on one replica to the Wait on
// another returning the decision.
func BenchmarkDecisionReachesWait(b *testing.B) {
	srv := natstest.Start(b)
	holder, decider := startB(b, srv.ClientURL()), startB(b, srv.ClientURL())
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		d, err := holder.Hold(ctx, call(fmt.Sprintf(`{"n": %d}`, i), time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := holder.Wait(ctx, d.ID); done <- err }()
		for approval.Waiters(holder) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		b.StartTimer()
		if _, err := decider.Decide(ctx, d.ID, true, "alice", "", approval.ViaCLI); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

func startB(b *testing.B, url string) *approval.Store {
	b.Helper()
	j, err := jsNew(natstest.Connect(b, url))
	if err != nil {
		b.Fatal(err)
	}
	s, err := approval.New(approval.Config{JS: j, Logger: natstest.Logger(b)})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}
