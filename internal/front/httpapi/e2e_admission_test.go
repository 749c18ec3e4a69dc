package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
	"github.com/toolpool/toolpool/jetstream"
)

// A flood past the orchestrator's bound on calls in flight: the excess
// turns get 429 with Retry-After at once, their calls an is_error saying
// the pool is saturated; the admitted ones all run, nothing expires into
// the dead-letter stream; once the load drains the refused turns are
// accepted (issue 12, finding 9).
func TestE2EFloodIsRefusedNotDeadLettered(t *testing.T) {
	t.Parallel()
	const bound, perTurn, turns = 8, 4, 10
	b := setupAPI(t, func(c *dispatch.Config) { c.MaxCallsInFlight = bound })
	bodies := make([]string, turns)
	for i := range bodies {
		var blocks []string
		for range perTurn {
			blocks = append(blocks, `{"type":"tool_use","id":"`+uid("toolu_flood_")+`","name":"sleep","input":{"ms":4000}}`)
		}
		bodies[i] = `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
	}
	type outcome struct {
		i  int
		a  answer
		at time.Time
	}
	out := make(chan outcome, turns)
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			a := b.post(t, "?timeout=60s", body)
			out <- outcome{i, a, time.Now()}
		})
	}
	wg.Wait()
	close(out)
	var ok, refused []outcome
	for o := range out {
		switch o.a.status {
		case http.StatusOK:
			ok = append(ok, o)
		case http.StatusTooManyRequests:
			refused = append(refused, o)
		default:
			t.Fatalf("turn %d: status %d %s", o.i, o.a.status, o.a.body)
		}
	}
	if len(ok) != bound/perTurn || len(refused) != turns-bound/perTurn {
		t.Fatalf("%d turns admitted and %d refused; want %d and %d", len(ok), len(refused), bound/perTurn, turns-bound/perTurn)
	}
	firstOK := ok[0].at
	for _, o := range ok {
		if o.at.Before(firstOK) {
			firstOK = o.at
		}
		var msg httpapi.UserMessage
		if err := json.Unmarshal(o.a.body, &msg); err != nil || len(msg.Content) != perTurn {
			t.Fatalf("admitted turn: %s", o.a.body)
		}
		for _, blk := range msg.Content {
			if blk.IsError {
				t.Errorf("an admitted call failed: %s", blk.Content.Text())
			}
		}
	}
	for _, o := range refused {
		if !o.at.Before(firstOK) {
			t.Errorf("turn %d was refused only after an admitted turn had run", o.i)
		}
		if o.a.header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
		var msg httpapi.UserMessage
		if err := json.Unmarshal(o.a.body, &msg); err != nil || msg.Role != "user" || len(msg.Content) != perTurn {
			t.Fatalf("refused turn's body: %s", o.a.body)
		}
		for _, blk := range msg.Content {
			if !blk.IsError || !strings.Contains(blk.Content.Text(), "saturated") {
				t.Errorf("refused call's result: %+v", blk)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := b.pool.JS.Stream(ctx, jetstream.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("%d dead letters after the flood", info.State.Msgs)
	}
	// The load has drained: a refused turn posted again runs.
	again := b.post(t, "?timeout=60s", bodies[refused[0].i])
	if again.status != http.StatusOK || strings.Contains(string(again.body), `"is_error"`) {
		t.Errorf("a refused turn posted again: %d %s", again.status, again.body)
	}
}
