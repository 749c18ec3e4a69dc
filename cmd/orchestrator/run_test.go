package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fakeanthropic"
	"github.com/toolpool/toolpool/internal/front/httpapi"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
)

// The run tests set ANTHROPIC_* in the environment, so they do not run in
// parallel.

// runRun runs "orchestrator run" with args against the fake model and
// returns its exit code, stdout and stderr.
func runRun(t *testing.T, model *fakeanthropic.Server, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	t.Setenv("ANTHROPIC_BASE_URL", model.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append([]string{"run"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// standalone are the flags of a self-contained run: embedded pool with one
// worker serving the demo tools, nothing written in the working directory.
func standalone(t *testing.T) []string {
	return []string{"--workers", "1", "--builtin-tools=false", "--workspace", t.TempDir()}
}

func TestRunStandalone(t *testing.T) {
	model := fakeanthropic.Start(t, fakeanthropic.Script(
		fakeanthropic.ToolUse(fakeanthropic.Call{ID: "toolu_cli_404", Name: "flaky", Input: `{"fail":"404"}`}),
		fakeanthropic.ToolUse(fakeanthropic.Call{ID: "toolu_cli_echo", Name: "echo", Input: `{"text":"fallback"}`}),
		fakeanthropic.Text("The page is gone; the fallback worked."),
	))
	code, stdout, stderr := runRun(t, model, append(standalone(t), "--task", "Fetch the page.", "--system", "Be brief.")...)
	if code != 0 {
		t.Fatalf("exit %d\nstderr: %s", code, stderr)
	}
	if stdout != "The page is gone; the fallback worked.\n" {
		t.Errorf("stdout %q", stdout)
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	if reqs[0].Model != "claude-opus-4-6" || reqs[0].MaxTokens != 4096 || reqs[0].APIKey != "test-key" {
		t.Errorf("first request: model %q max_tokens %d key %q", reqs[0].Model, reqs[0].MaxTokens, reqs[0].APIKey)
	}
	var names []string
	for _, tool := range reqs[0].Tools {
		names = append(names, string(tool))
	}
	if !strings.Contains(strings.Join(names, ","), `"name":"flaky"`) {
		t.Errorf("tools offered: %s", names)
	}
	tr := reqs[1].ToolResults()
	if len(tr) != 1 || tr[0].ToolUseID != "toolu_cli_404" || tr[0].IsError == nil || !*tr[0].IsError {
		t.Errorf("the 404 reached the model as %+v; want is_error: true", tr)
	}
	tr = reqs[2].ToolResults()
	if len(tr) != 1 || tr[0].IsError != nil || tr[0].ResultText() != "fallback" {
		t.Errorf("the echo reached the model as %+v", tr)
	}
}

func TestRunIterationLimit(t *testing.T) {
	model := fakeanthropic.Start(t, func(i int) (fakeanthropic.Reply, bool) {
		return fakeanthropic.ToolUse(fakeanthropic.Call{ID: fmt.Sprintf("toolu_cli_loop_%d", i), Name: "echo", Input: `{"text":"more"}`}), true
	})
	code, stdout, stderr := runRun(t, model, append(standalone(t), "--task", "Loop.", "--max-iterations", "2")...)
	if code != 3 || stdout != "" {
		t.Fatalf("exit %d stdout %q, want 3 and nothing\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "stopped at the iteration limit: 2 model requests") || !strings.Contains(stderr, "--max-iterations") {
		t.Errorf("stderr %q does not explain the stop", stderr)
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2", n)
	}
}

func TestRunWithoutAPIKey(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--task", "x"}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "ANTHROPIC_API_KEY is not set") {
		t.Errorf("exit %d, stderr %q; want 2 and a message naming ANTHROPIC_API_KEY", code, stderr.String())
	}
}

func TestRunUsage(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "k")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{}, "--task is required"},
		{[]string{"--task", "x", "--max-iterations", "0"}, "--max-iterations"},
		{[]string{"--task", "x", "--api", "http://127.0.0.1:1", "--nats-url", "nats://127.0.0.1:1"}, "not both"},
		{[]string{"--task", "x", "--api", "127.0.0.1:8080"}, "base URL"},
		{[]string{"--task", "x", "stray"}, "unexpected argument"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append([]string{"run"}, c.args...), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
	// Nothing listens: exit 2, saying there is no pool.
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"run", "--task", "x", "--api", "http://127.0.0.1:1"}, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "no pool") {
		t.Errorf("unreachable --api: exit %d stderr %q", code, stderr.String())
	}
}

// --api: the tools and the calls go through a running orchestrator's HTTP
// API.
func TestRunOverAPI(t *testing.T) {
	p := pooltest.Start(t)
	h, err := httpapi.New(httpapi.Config{Dispatcher: p.D, Definitions: httpapi.RegistryDefinitions(p.Reg)})
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(h)
	t.Cleanup(api.Close)
	model := fakeanthropic.Start(t, fakeanthropic.Script(
		fakeanthropic.ToolUse(fakeanthropic.Call{ID: "toolu_cli_api", Name: "sleep", Input: `{"ms":10}`}),
		fakeanthropic.Text("Slept."),
	))
	code, stdout, stderr := runRun(t, model, "--api", api.URL, "--task", "Sleep.")
	if code != 0 || stdout != "Slept.\n" {
		t.Fatalf("exit %d stdout %q stderr %s", code, stdout, stderr)
	}
	if tr := model.Requests()[1].ToolResults(); len(tr) != 1 || tr[0].ResultText() != "slept 10 ms" {
		t.Errorf("tool results %+v", tr)
	}
}

// --nats-url: the pool of that server; here its workers run in-process
// and announce their tools in the live catalog.
func TestRunOnNATSURL(t *testing.T) {
	srv := natstest.Start(t)
	model := fakeanthropic.Start(t, fakeanthropic.Script(
		fakeanthropic.ToolUse(fakeanthropic.Call{ID: "toolu_cli_nats", Name: "echo", Input: `{"text":"via nats"}`}),
		fakeanthropic.Text("ok"),
	))
	code, stdout, stderr := runRun(t, model, "--nats-url", srv.ClientURL(), "--workers", "1", "--demo-tools",
		"--builtin-tools=false", "--workspace", t.TempDir(), "--task", "Echo.")
	if code != 0 || stdout != "ok\n" {
		t.Fatalf("exit %d stdout %q stderr %s", code, stdout, stderr)
	}
	if tr := model.Requests()[1].ToolResults(); len(tr) != 1 || tr[0].ResultText() != "via nats" {
		t.Errorf("tool results %+v", tr)
	}
}
