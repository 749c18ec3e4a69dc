package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"go.uber.org/goleak"

	"github.com/toolpool/toolpool/internal/agent"
	"github.com/toolpool/toolpool/internal/fakeanthropic"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/client"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// setup starts a pool with the demo tools, a fake model answering from
// script, and a Loop wired to both through the real SDK and client.Local.
func setup(t *testing.T, script func(int) (fakeanthropic.Reply, bool)) (*agent.Loop, *fakeanthropic.Server, *pooltest.Pool) {
	t.Helper()
	p := pooltest.Start(t)
	model := fakeanthropic.Start(t, script)
	local := client.NewLocal(p.D, httpapi.RegistryDefinitions(p.Reg))
	tools, err := local.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := anthropic.NewClient(option.WithBaseURL(model.URL), option.WithAPIKey("test-key"), option.WithMaxRetries(0))
	return &agent.Loop{Client: &c.Messages, Dispatcher: local, Tools: tools, Logger: natstest.Logger(t)}, model, p
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The seed's scenario: a tool fails permanently, the model sees is_error,
// calls another tool and answers.
func TestRunErrorThenAnotherToolThenAnswer(t *testing.T) {
	t.Parallel()
	loop, model, _ := setup(t, fakeanthropic.Script(
		fakeanthropic.ToolUse(fakeanthropic.Call{ID: "toolu_404", Name: "flaky", Input: `{"fail":"404"}`}),
		fakeanthropic.ToolUse(fakeanthropic.Call{ID: "toolu_echo", Name: "echo", Input: `{"text":"plan B worked"}`}),
		fakeanthropic.Text("The page does not exist, but plan B worked."),
	))
	loop.System = "You are a careful agent."
	res, err := loop.Run(ctxFor(t), "Fetch the page.")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "The page does not exist, but plan B worked." || res.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("result %q (%s)", res.Text, res.StopReason)
	}
	if res.Iterations != 3 || res.ToolCalls != 2 || res.ToolErrors != 1 || len(res.Messages) != 6 {
		t.Errorf("iterations %d, tool calls %d, errors %d, messages %d; want 3, 2, 1, 6",
			res.Iterations, res.ToolCalls, res.ToolErrors, len(res.Messages))
	}

	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	first := reqs[0]
	if first.Model != "claude-opus-4-6" || first.MaxTokens != 4096 || first.APIKey != "test-key" {
		t.Errorf("first request: model %q max_tokens %d key %q", first.Model, first.MaxTokens, first.APIKey)
	}
	if len(first.Tools) != 3 || !strings.Contains(string(first.Tools[0]), `"name":"echo"`) || !strings.Contains(string(first.Tools[0]), `"input_schema"`) {
		t.Errorf("tools sent: %s", first.Tools)
	}
	if !strings.Contains(string(first.System), "You are a careful agent.") {
		t.Errorf("system sent: %s", first.System)
	}
	if first.Messages[0].Content[0].Text != "Fetch the page." {
		t.Errorf("task sent: %+v", first.Messages[0])
	}

	tr := reqs[1].ToolResults()
	if len(tr) != 1 || tr[0].ToolUseID != "toolu_404" {
		t.Fatalf("second request's tool results: %+v", tr)
	}
	if tr[0].IsError == nil || !*tr[0].IsError {
		t.Errorf("the flaky 404 result reached the model without is_error: true: %s", reqs[1].Messages[2].RawBody)
	}
	if !strings.Contains(tr[0].ResultText(), "flaky") {
		t.Errorf("error content %q does not name the tool", tr[0].ResultText())
	}
	tr = reqs[2].ToolResults()
	if len(tr) != 1 || tr[0].ToolUseID != "toolu_echo" || tr[0].IsError != nil || tr[0].ResultText() != "plan B worked" {
		t.Errorf("third request's tool results: %+v (%s)", tr, reqs[2].Messages[4].RawBody)
	}
}

func TestRunStopsAtTheIterationLimit(t *testing.T) {
	t.Parallel()
	loop, model, _ := setup(t, func(i int) (fakeanthropic.Reply, bool) {
		return fakeanthropic.ToolUse(fakeanthropic.Call{ID: fmt.Sprintf("toolu_loop_%d", i), Name: "echo", Input: `{"text":"again"}`}), true
	})
	loop.MaxIterations = 3
	res, err := loop.Run(ctxFor(t), "Never stop.")
	if !errors.Is(err, agent.ErrMaxIterations) {
		t.Fatalf("err = %v, want ErrMaxIterations", err)
	}
	if !strings.Contains(err.Error(), "after 3 model requests the model still asked for tools (echo)") {
		t.Errorf("message %q does not say what happened", err)
	}
	if n := len(model.Requests()); n != 3 || res.Iterations != 3 || res.ToolCalls != 2 {
		t.Errorf("%d requests, %d iterations, %d tool calls; want 3, 3, 2", n, res.Iterations, res.ToolCalls)
	}
}

// The third failure in a row of one tool in the run's session carries the
// sentence telling the model to change approach: the dispatcher adds it,
// and the model receives it in the tool_result content.
func TestRunRepeatedFailureAdvice(t *testing.T) {
	t.Parallel()
	fail := func(n int) fakeanthropic.Reply {
		return fakeanthropic.ToolUse(fakeanthropic.Call{ID: fmt.Sprintf("toolu_fail_%d", n), Name: "flaky", Input: `{"fail":"404"}`})
	}
	loop, model, _ := setup(t, fakeanthropic.Script(fail(1), fail(2), fail(3), fakeanthropic.Text("I give up on flaky.")))
	loop.Session = "sess-advice"
	if _, err := loop.Run(ctxFor(t), "Try flaky."); err != nil {
		t.Fatal(err)
	}
	reqs := model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	advice := classify.RepeatedFailureMessage("flaky", 3)
	// Requests 2, 3 and 4 carry the first, second and third failure.
	for i, req := range reqs[1:] {
		tr := req.ToolResults()
		if len(tr) != 1 || tr[0].IsError == nil || !*tr[0].IsError {
			t.Fatalf("request %d: tool results %+v, want one is_error", i+2, tr)
		}
		has := strings.Contains(tr[0].ResultText(), advice)
		if has != (i == 2) {
			t.Errorf("failure %d: advice present = %v; content %q", i+1, has, tr[0].ResultText())
		}
	}
}

// countingDispatcher counts the Dispatch calls and their sizes.
type countingDispatcher struct {
	agent.Dispatcher
	mu    sync.Mutex
	sizes []int
}

func (c *countingDispatcher) Dispatch(ctx context.Context, session string, uses []anthropic.ToolUseBlock) ([]anthropic.ToolResultBlockParam, error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, len(uses))
	c.mu.Unlock()
	return c.Dispatcher.Dispatch(ctx, session, uses)
}

// All calls of a turn go to the pool in one Dispatch, and run in parallel.
func TestRunDispatchesATurnAtOnce(t *testing.T) {
	t.Parallel()
	loop, model, _ := setup(t, fakeanthropic.Script(
		fakeanthropic.ToolUse(
			fakeanthropic.Call{ID: "toolu_s1", Name: "sleep", Input: `{"ms":300}`},
			fakeanthropic.Call{ID: "toolu_s2", Name: "sleep", Input: `{"ms":300}`},
			fakeanthropic.Call{ID: "toolu_e", Name: "echo", Input: `{"text":"x"}`},
		),
		fakeanthropic.Text("ok"),
	))
	cd := &countingDispatcher{Dispatcher: loop.Dispatcher}
	loop.Dispatcher = cd
	if _, err := loop.Run(ctxFor(t), "Sleep twice."); err != nil {
		t.Fatal(err)
	}
	if len(cd.sizes) != 1 || cd.sizes[0] != 3 {
		t.Errorf("Dispatch calls %v, want one of 3", cd.sizes)
	}
	tr := model.Requests()[1].ToolResults()
	if len(tr) != 3 || tr[0].ToolUseID != "toolu_s1" || tr[1].ToolUseID != "toolu_s2" || tr[2].ToolUseID != "toolu_e" {
		t.Errorf("results %+v, want the calls' order", tr)
	}
}

// The same loop over the HTTP API, with client.Pool.
func TestRunOverTheHTTPAPI(t *testing.T) {
	t.Parallel()
	p := pooltest.Start(t)
	h, err := httpapi.New(httpapi.Config{Dispatcher: p.D, Definitions: httpapi.RegistryDefinitions(p.Reg)})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(h)
	t.Cleanup(api.Close)
	pool, err := client.New(api.URL)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := pool.Tools(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	model := fakeanthropic.Start(t, fakeanthropic.Script(
		fakeanthropic.ToolUse(fakeanthropic.Call{ID: "toolu_http", Name: "echo", Input: `{"text":"over http"}`},
			fakeanthropic.Call{ID: "toolu_http_404", Name: "flaky", Input: `{"fail":"404"}`}),
		fakeanthropic.Text("done"),
	))
	c := anthropic.NewClient(option.WithBaseURL(model.URL), option.WithAPIKey("k"), option.WithMaxRetries(0))
	loop := &agent.Loop{Client: &c.Messages, Dispatcher: pool, Tools: tools}
	res, err := loop.Run(ctxFor(t), "Echo.")
	if err != nil || res.Text != "done" || res.ToolErrors != 1 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	tr := model.Requests()[1].ToolResults()
	if len(tr) != 2 || tr[0].ResultText() != "over http" || tr[0].IsError != nil || tr[1].IsError == nil || !*tr[1].IsError {
		t.Errorf("results %+v", tr)
	}
}

func TestRunRefusesBadLoops(t *testing.T) {
	t.Parallel()
	loop := &agent.Loop{}
	if _, err := loop.Run(context.Background(), "x"); err == nil {
		t.Error("a loop without client and dispatcher ran")
	}
	c := anthropic.NewClient(option.WithAPIKey("k"))
	loop = &agent.Loop{Client: &c.Messages, Dispatcher: client.NewLocal(nil, nil)}
	if _, err := loop.Run(context.Background(), "  "); err == nil {
		t.Error("an empty task ran")
	}
	loop.MaxIterations = -1
	if _, err := loop.Run(context.Background(), "x"); err == nil {
		t.Error("a negative MaxIterations ran")
	}
}

// A model request that fails ends the run with an error naming it.
func TestRunModelError(t *testing.T) {
	t.Parallel()
	loop, _, _ := setup(t, fakeanthropic.Script()) // no replies: 500
	_, err := loop.Run(ctxFor(t), "x")
	if err == nil || !strings.Contains(err.Error(), "model request 1 failed") {
		t.Errorf("err = %v", err)
	}
}
