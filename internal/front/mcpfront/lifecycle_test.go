package mcpfront

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/infra/startstop"
)

// A server starts once, and not again after Stop; Stop before Start
// returns at once and refuses calls from then on; Stopped is closed once
// Stop has returned.
func TestStartStop(t *testing.T) {
	t.Parallel()
	changes := make(chan struct{})
	unsubscribed := make(chan struct{})
	s, err := New(Config{Dispatcher: &scripted{}, Tools: staticTools, Subscribe: func() (<-chan struct{}, func()) {
		return changes, func() { close(unsubscribed) }
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err == nil || err.Error() != "mcpfront: already started" || !errors.Is(err, startstop.ErrStarted) {
		t.Errorf("a second Start: %v", err)
	}
	changes <- struct{}{} // followed until Stop
	if err := s.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	select {
	case <-unsubscribed:
	default:
		t.Error("Stop returned still following the catalog")
	}
	<-s.Stopped()
	if err := s.Start(t.Context()); err == nil {
		t.Error("Start after Stop succeeded")
	}

	never, err := New(Config{Dispatcher: &scripted{}, Tools: staticTools})
	if err != nil {
		t.Fatal(err)
	}
	if err := never.Stop(context.Background()); err != nil {
		t.Errorf("Stop before Start: %v", err)
	}
	<-never.Stopped()
	res, err := never.call(t.Context(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "slow"}})
	r, ok := res.(*mcp.CallToolResult)
	if err != nil || !ok || !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, "restarting") {
		t.Errorf("a call after Stop: %+v, %v; want an isError result saying the pool restarts", res, err)
	}
}
