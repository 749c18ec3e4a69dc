package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
	"github.com/toolpool/toolpool/internal/testdeps"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
)

// consoleShots is where the tests write the console's screenshots that
// docs/console.md shows: made by the tests, so never stale.
var consoleShots = filepath.Join("..", "docs", "console")

// findChromium returns the browser (testdeps.Chromium: installed in CI
// when missing, skipping the test elsewhere).
func findChromium(t *testing.T) string {
	t.Helper()
	return testdeps.Chromium.Path(t)
}

// consolePool is `orchestrator serve` (embedded NATS, in-process workers
// with the demo tools, the HTTP API and the console) with one operator.
type consolePool struct {
	http, nats string
	token      string
	nc         *nats.Conn
	js         js.JetStream
}

const (
	operatorToken  = "e2e-operator-token-0123456789abcdef"
	secretInURL    = "e2e-secret-url-key-5f1d"
	secretInHeader = "e2e-secret-header-9c2a"
)

func startConsolePool(t *testing.T) *consolePool {
	t.Helper()
	// A webhook tool with secrets in its URL and headers: the console
	// must never show them.
	return startConsolePoolWith(t, `version: 1
tools:
  - name: hook
    description: A webhook whose URL and headers hold secrets.
    input_schema: {type: object, properties: {q: {type: string}}}
    backend: webhook
    webhook:
      url: https://hook.example.com/v1?key=`+secretInURL+`
      headers:
        Authorization: Bearer `+secretInHeader+`
`)
}

// startConsolePoolWith is startConsolePool serving the catalog given
// (YAML) besides the demo tools.
func startConsolePoolWith(t *testing.T, catalogYAML string) *consolePool {
	t.Helper()
	tmp := t.TempDir()
	tokens := filepath.Join(tmp, "ui-tokens.yaml")
	if err := os.WriteFile(tokens, []byte("alice: "+operatorToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	catalog := filepath.Join(tmp, "tools.yaml")
	if err := os.WriteFile(catalog, []byte(catalogYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &consolePool{http: natstest.FreeAddr(t), nats: natstest.FreeAddr(t), token: operatorToken}
	proc := proctest.Start(t, orchestratorBin, "serve",
		"--data-dir", filepath.Join(tmp, "data"), "--nats-listen", p.nats, "--http", p.http,
		"--workspace", filepath.Join(tmp, "ws"), "--tools", catalog, "--ui-tokens", tokens, "--drain-timeout", "5s")
	proc.WaitHTTP("http://"+p.http+"/readyz", waitLong)
	nc, err := nats.Connect("nats://" + p.nats)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p.nc = nc
	if p.js, err = js.New(nc); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *consolePool) url(path string) string { return "http://" + p.http + path }

// call makes one tool call through the HTTP API and returns the answer.
func (p *consolePool) call(t *testing.T, tool, input string) string {
	t.Helper()
	body := `{"role":"assistant","content":[{"type":"tool_use","id":"` + newCallID() + `","name":"` + tool + `","input":` + input + `}]}`
	resp, err := http.Post(p.url("/v1/tool_calls"), "application/json", strings.NewReader(body))
	if err != nil {
		t.Errorf("POST /v1/tool_calls: %v", err)
		return ""
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /v1/tool_calls: %d %s", resp.StatusCode, out)
	}
	return string(out)
}

// consumerPaused reports whether the tool's consumer is paused.
func (p *consolePool) consumerPaused(t *testing.T, tool string) bool {
	t.Helper()
	c, err := p.js.Consumer(context.Background(), jetstream.StreamCalls, jetstream.ConsumerName(tool))
	if err != nil {
		t.Fatal(err)
	}
	return c.CachedInfo().Paused
}

// hasLetter reports whether TOOL_DLQ holds seq.
func (p *consolePool) hasLetter(t *testing.T, seq uint64) bool {
	t.Helper()
	s, err := dlq.NewStore(context.Background(), p.js)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(context.Background(), seq)
	return err == nil
}

// newBrowser starts headless Chromium with a fresh profile; the network
// of this machine is closed, so everything that would reach out is off.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(findChromium(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return ctx
}

// browse runs browser actions, with a bound, failing the test on error.
func browse(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// value runs one browser action that returns a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	return value(t, ctx, expr, chromedp.Evaluate[T](expr))
}

// css is a CSS selector.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// textOf is the text of the first element sel matches ("" when none).
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return strings.TrimSpace(eval[string](t, ctx, `(document.querySelector(`+strconv.Quote(sel)+`)||{}).textContent||""`))
}

// screenshot writes the page as docs/console/name.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	if err := os.MkdirAll(consoleShots, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(consoleShots, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// loadTime is how long the browser took to load the current page, from
// the navigation's start to the end of its load event.
func loadTime(t *testing.T, ctx context.Context) time.Duration {
	t.Helper()
	ms := eval[float64](t, ctx, `(()=>{const e=performance.getEntriesByType("navigation")[0];return e.loadEventEnd-e.startTime})()`)
	return time.Duration(ms * float64(time.Millisecond))
}

// The console in a real browser against a real pool: login, the
// overview's live counts, a dead letter replayed and purged, pause and
// resume, and the refusals.
func TestConsole(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	p := startConsolePool(t)

	t.Run("without a token the page is refused", func(t *testing.T) {
		resp, err := http.Get(p.url("/ui/overview.frag"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusUnauthorized && resp.Request.URL.Path != "/ui/login" {
			t.Errorf("GET /ui/overview.frag without a session: %d at %s", resp.StatusCode, resp.Request.URL)
		}
		browse(t, ctx, "open /ui/ without a token", chromedp.Navigate(p.url("/ui/")), chromedp.WaitVisible(css(`input[name="token"]`)))
		loc := value(t, ctx, "location", chromedp.Location())
		if !strings.HasSuffix(loc, "/ui/login") || textOf(t, ctx, "#tools") != "" {
			t.Errorf("without a token the browser is at %s, overview %q; want the login page and no overview", loc, textOf(t, ctx, "#tools"))
		}
		browse(t, ctx, "log in with a wrong token", chromedp.SendKeys(css(`input[name="token"]`), "not-the-operator-token-000000"),
			chromedp.Submit(css(`input[name="token"]`)), chromedp.WaitVisible(css("#login-error")))
		// The agents' API keys are no operator tokens; the operator's is.
		browse(t, ctx, "log in", chromedp.SendKeys(css(`input[name="token"]`), p.token), chromedp.Submit(css(`input[name="token"]`)),
			chromedp.WaitVisible(css("#tools")))
		if who := textOf(t, ctx, ".who span"); who != "alice" {
			t.Errorf("logged in as %q, want alice", who)
		}
	})

	t.Run("the overview shows counts rising while calls run", func(t *testing.T) {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				p.call(t, "sleep", `{"ms":50}`)
			}
		}()
		defer func() { close(stop); <-done }()
		okCount := func() int {
			n, _ := strconv.Atoi(textOf(t, ctx, `tr[data-tool="sleep"] td.ok`))
			return n
		}
		browse(t, ctx, "open the overview", chromedp.Navigate(p.url("/ui/")), chromedp.WaitVisible(css("#tools")))
		var first int
		eventually(t, "the overview to count sleep's results", func() bool { first = okCount(); return first > 0 })
		eventually(t, "sleep's count to rise on the page (polled, not reloaded)", func() bool { return okCount() > first })
	})

	t.Run("a tool's catalog entry shows no secrets", func(t *testing.T) {
		browse(t, ctx, "open hook's page", chromedp.Navigate(p.url("/ui/tools/hook")), chromedp.WaitVisible(css("table.kv pre")))
		html := eval[string](t, ctx, `document.documentElement.outerHTML`)
		if !strings.Contains(html, "A webhook whose URL and headers hold secrets.") {
			t.Errorf("hook's page lacks its description:\n%s", html)
		}
		for _, secret := range []string{secretInURL, secretInHeader, "hook.example.com"} {
			if strings.Contains(html, secret) {
				t.Errorf("hook's page shows %q", secret)
			}
		}
		// The workers serving it, with their build (a binary built from
		// this module's checkout: "(devel)" and its revision when known).
		if !strings.Contains(html, "<td>(devel)") {
			t.Errorf("hook's page does not show its workers' version:\n%s", html)
		}
	})

	var letter uint64
	t.Run("a dead letter of flaky is shown and replayed from the page", func(t *testing.T) {
		if out := p.call(t, "flaky", `{"fail":"503","times":10}`); !strings.Contains(out, "dead-lettered") {
			t.Fatalf("flaky's answer %s; want a dead letter", out)
		}
		browse(t, ctx, "list flaky's dead letters", chromedp.Navigate(p.url("/ui/dlq?tool=flaky")), chromedp.WaitVisible(css(`#letters tbody tr[data-seq]`)))
		seq := value(t, ctx, "read the seq", chromedp.AttributeValue(css(`#letters tbody tr[data-seq]`), "data-seq")).Value
		letter, _ = strconv.ParseUint(seq, 10, 64)
		browse(t, ctx, "open the entry", chromedp.Click(css(`#letters tbody tr[data-seq] a`)), chromedp.WaitVisible(css("#attempts")))
		attempts := eval[int](t, ctx, `document.querySelectorAll("#attempts tbody tr").length`)
		if attempts != 3 || !strings.Contains(textOf(t, ctx, "#attempts"), "http_503") {
			t.Errorf("entry shows %d attempts (%q), want flaky's 3 with http_503", attempts, textOf(t, ctx, "#attempts"))
		}
		if words := textOf(t, ctx, "#last-words"); !strings.Contains(words, "dead-lettered") {
			t.Errorf("the model's last words: %q", words)
		}
		if in := textOf(t, ctx, "#input"); !strings.Contains(in, `"fail": "503"`) {
			t.Errorf("input: %q", in)
		}
		screenshot(t, ctx, "dead-letter.png")
		browse(t, ctx, "replay it", chromedp.Click(css("#replay-one")), chromedp.WaitVisible(css("#act-go")),
			chromedp.SetValue(css(`input[name="rate"]`), "5"), chromedp.Click(css("#act-go")),
			chromedp.WaitVisible(css(`#act-dialog[data-done="done"]`)), chromedp.WaitVisible(css("#act-calls tbody tr")))
		if state := textOf(t, ctx, "#act-state"); !strings.Contains(state, "replayed 1") {
			t.Errorf("replay progress %q, want 1 replayed", state)
		}
		// flaky fails its first 10 attempts again: the replayed call's own
		// result is an is_error, shown per call.
		if row := textOf(t, ctx, "#act-calls tbody tr"); !strings.Contains(row, seq) || !strings.Contains(row, "is_error") {
			t.Errorf("replay's call row %q, want seq %s with its is_error result", row, seq)
		}
		screenshot(t, ctx, "replay.png")
		browse(t, ctx, "back to the list", chromedp.Navigate(p.url("/ui/dlq?tool=flaky")), chromedp.WaitVisible(css("#letters")))
		still := eval[int](t, ctx, `document.querySelectorAll('#letters tr[data-seq="`+seq+`"]').length`)
		if still != 0 || p.hasLetter(t, letter) {
			t.Errorf("dead letter %s is still listed (%d) or stored after its replay", seq, still)
		}
	})

	t.Run("purge requires the typed confirmation", func(t *testing.T) {
		p.call(t, "flaky", `{"fail":"503","times":10}`)
		browse(t, ctx, "list", chromedp.Navigate(p.url("/ui/dlq?tool=flaky&code=http_503")), chromedp.WaitVisible(css(`#letters tbody tr[data-seq]`)))
		seq := value(t, ctx, "read the seq", chromedp.AttributeValue(css(`#letters tbody tr[data-seq]`), "data-seq")).Value
		n, _ := strconv.ParseUint(seq, 10, 64)
		browse(t, ctx, "purge without confirming", chromedp.Click(css(`#letters tbody tr[data-seq] input[name="seq"]`)),
			chromedp.Click(css(`button[data-act="purge"][data-scope="selected"]`)), chromedp.WaitVisible(css("#confirm")),
			chromedp.SendKeys(css("#confirm"), "yes"), chromedp.Click(css("#act-go")))
		eventually(t, "the refusal to show", func() bool { return textOf(t, ctx, "#act-error") != "" })
		if msg := textOf(t, ctx, "#act-error"); !strings.Contains(msg, "purge") || !p.hasLetter(t, n) {
			t.Errorf("an unconfirmed purge: message %q, letter kept %v; want a refusal that keeps it", msg, p.hasLetter(t, n))
		}
		eval[bool](t, ctx, `(document.getElementById("confirm").value = "") === ""`)
		browse(t, ctx, "purge, confirmed", chromedp.SendKeys(css("#confirm"), "purge"),
			chromedp.Click(css("#act-go")), chromedp.WaitVisible(css(`#act-dialog[data-done="done"]`)))
		if p.hasLetter(t, n) {
			t.Errorf("dead letter %d is stored after a confirmed purge (%s)", n, textOf(t, ctx, "#act-state"))
		}
	})

	t.Run("overview screenshot", func(t *testing.T) {
		browse(t, ctx, "open the overview", chromedp.Navigate(p.url("/ui/")), chromedp.WaitVisible(css(`tr[data-tool="flaky"] td.errors span`)))
		screenshot(t, ctx, "overview.png")
	})

	t.Run("pause stops a tool's calls fleet-wide and resume restarts them", func(t *testing.T) {
		p.call(t, "echo", `{"text":"before"}`) // the consumer exists
		browse(t, ctx, "pause echo", chromedp.Navigate(p.url("/ui/tools/echo")), chromedp.WaitVisible(css("#pause")),
			chromedp.Click(css("#pause")), chromedp.WaitVisible(css("#resume")))
		if !p.consumerPaused(t, "echo") {
			t.Fatal("echo's consumer is not paused after the page's pause")
		}
		answer := make(chan string, 1)
		go func() { answer <- p.call(t, "echo", `{"text":"while paused"}`) }()
		eventually(t, "the tool page to show the paused call queued", func() bool {
			return textOf(t, ctx, "#toolstate td.queued") == "1"
		})
		select {
		case out := <-answer:
			t.Fatalf("a call to the paused tool was answered: %s", out)
		default:
		}
		browse(t, ctx, "resume echo", chromedp.Click(css("#resume")), chromedp.WaitVisible(css("#pause")))
		if out := <-answer; !strings.Contains(out, "while paused") {
			t.Errorf("the call after resume: %s", out)
		}
	})

	t.Run("the live tail shows results, filtered, and pauses", func(t *testing.T) {
		browse(t, ctx, "open the tail", chromedp.Navigate(p.url("/ui/tail?tool=echo")), chromedp.WaitVisible(css("#tail")))
		p.call(t, "echo", `{"text":"tailed"}`)
		eventually(t, "the tail to show echo's result", func() bool { return strings.Contains(textOf(t, ctx, "#tail tbody"), "echo") })
		if body := textOf(t, ctx, "#tail tbody"); strings.Contains(body, "sleep") || !strings.Contains(body, "ok") {
			t.Errorf("tail filtered on echo shows %q", body)
		}
		browse(t, ctx, "pause the tail", chromedp.Click(css("#tail-pause")))
		before := eval[int](t, ctx, `document.querySelectorAll("#tail tbody tr").length`)
		p.call(t, "echo", `{"text":"while the tail is paused"}`)
		eventually(t, "the paused tail to see the new result waiting", func() bool {
			return eval[int](t, ctx, `+(document.getElementById("tail").dataset.waiting || 0)`) >= 1
		})
		if after := eval[int](t, ctx, `document.querySelectorAll("#tail tbody tr").length`); after != before {
			t.Errorf("the paused tail grew from %d to %d rows", before, after)
		}
		browse(t, ctx, "resume the tail", chromedp.Click(css("#tail-pause")))
		eventually(t, "the resumed tail to show the result", func() bool {
			return eval[int](t, ctx, `document.querySelectorAll("#tail tbody tr").length`) > before
		})
	})

	t.Run("a forged cross-site POST is refused", func(t *testing.T) {
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<form id="f" method="post" action="%s"><input name="csrf" value="guessed"></form><script>document.getElementById("f").submit()</script>`,
				p.url("/ui/tools/echo/pause"))
		}))
		defer evil.Close()
		browse(t, ctx, "visit the forging page", chromedp.Navigate(evil.URL))
		body := value(t, ctx, "the forged POST's answer", chromedp.Poll[string](`location.href.includes("/ui/tools/echo/pause") && document.body.innerText`))
		if !strings.Contains(strings.ToLower(body), "refused") {
			t.Errorf("forged POST answered %q, want a refusal", body)
		}
		if p.consumerPaused(t, "echo") {
			t.Error("a forged cross-site POST paused echo")
		}
		// Nor does a same-origin POST without a session.
		req, _ := http.NewRequest(http.MethodPost, p.url("/ui/tools/echo/pause"), strings.NewReader("csrf=guessed"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://"+p.http)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusSeeOther || p.consumerPaused(t, "echo") {
			t.Errorf("a POST without a session: %d", resp.StatusCode)
		}
	})

	t.Run("render times with 100,000 dead letters of 50 tools", func(t *testing.T) {
		seedLetters(t, p.js, 100000, 50)
		browse(t, ctx, "overview", chromedp.Navigate(p.url("/ui/")), chromedp.WaitVisible(css(`tr[data-tool="tool-49"]`)))
		over := loadTime(t, ctx)
		browse(t, ctx, "filtered dead letters", chromedp.Navigate(p.url("/ui/dlq?tool=tool-07&reason=exhausted&code=http_503")), chromedp.WaitVisible(css(`#letters tbody tr[data-seq]`)))
		filtered := loadTime(t, ctx)
		browse(t, ctx, "text search", chromedp.Navigate(p.url("/ui/dlq?q=needle-31")), chromedp.WaitVisible(css(`#letters tbody tr[data-seq]`)))
		search := loadTime(t, ctx)
		rows := eval[int](t, ctx, `document.querySelectorAll("#letters tbody tr[data-seq]").length`)
		browse(t, ctx, "text search matching nothing", chromedp.Navigate(p.url("/ui/dlq?q=no-such-text")), chromedp.WaitVisible(css(`#letters tbody tr.empty`)))
		nothing := loadTime(t, ctx)
		t.Logf("browser-measured load times with 100,000 dead letters over 50 tools: overview %v, filtered dead-letter page %v, "+
			"text search finding its page %v (%d rows), text search matching nothing (reads all) %v", over, filtered, search, rows, nothing)
	})
}

// seedBatch is how many asynchronous publishes seedLetters lets be
// outstanding: well under the 4,000 after which nats.go stalls a publish
// and, on a busy machine, fails it (ErrTooManyStalledMsgs).
const seedBatch = 1000

// seedLetters stores n dead letters spread over tools tool-00.. in TOOL_DLQ,
// as a worker would, with asynchronous publishes.
func seedLetters(t *testing.T, j js.JetStream, n, tools int) {
	t.Helper()
	for i := range n {
		tool := fmt.Sprintf("tool-%02d", i%tools)
		id := fmt.Sprintf("seed-%d", i)
		call := fmt.Sprintf(`{"v":1,"id":%q,"tool":%q,"input":{"q":"needle-%d"},"tenant":"t%d","created_at":"2026-01-01T00:00:00Z","deadline":"2026-01-01T00:01:00Z"}`, id, tool, i%1000, i%7)
		e := settle.NewEntry(classify.FateExhausted, tool, id, []byte(call))
		e.Error = "its service is unavailable (HTTP 503)"
		e.Attempts = []settle.Attempt{{N: 1, WorkerID: "w1", Class: "transient", Code: "http_503", Message: e.Error, Started: time.Now(), Duration: time.Millisecond}}
		e.FirstFailure, e.LastFailure = time.Now(), time.Now()
		m, err := e.Msg(jetstream.DLQSubject(tool), id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
		if i%seedBatch == seedBatch-1 {
			select {
			case <-j.PublishAsyncComplete():
			case <-time.After(waitLong):
				t.Fatal("seeding dead letters: publishes not acknowledged")
			}
		}
	}
	select {
	case <-j.PublishAsyncComplete():
	case <-time.After(waitLong):
		t.Fatal("seeding dead letters: publishes not acknowledged")
	}
}
