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
	"sync"
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
	return startConsolePoolWith(t, hookCatalog)
}

// hookCatalog is a webhook tool with secrets in its URL and headers: the
// console must never show them.
const hookCatalog = `version: 1
tools:
  - name: hook
    description: A webhook whose URL and headers hold secrets.
    input_schema: {type: object, properties: {q: {type: string}}}
    backend: webhook
    webhook:
      url: https://hook.example.com/v1?key=` + secretInURL + `
      headers:
        Authorization: Bearer ` + secretInHeader + `
`

// startConsolePoolWith is startConsolePool serving the catalog given
// (YAML) besides the demo tools, with serve's flags args added.
func startConsolePoolWith(t *testing.T, catalogYAML string, args ...string) *consolePool {
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
	proc := proctest.Start(t, orchestratorBin, append([]string{"serve",
		"--data-dir", filepath.Join(tmp, "data"), "--nats-listen", p.nats, "--http", p.http,
		"--workspace", filepath.Join(tmp, "ws"), "--tools", catalog, "--ui-tokens", tokens, "--drain-timeout", "5s"}, args...)...)
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

// sharedBrowser is one headless Chromium that the console tests share
// while any of them runs: starting one takes seconds of CPU (up to 20 s on
// a loaded machine), a browser context in it a few milliseconds. Each test
// gets its own browser context (newBrowser): its own cookies, storage and
// cache, as in a browser of its own. The last test to finish closes it, so
// no process or goroutine outlives the tests (TestMain's leak check).
var sharedBrowser struct {
	mu     sync.Mutex
	users  int
	ctx    context.Context // the browser's first tab, parent of the tests' contexts
	cancel func()
}

// acquireBrowser returns the shared browser's context, starting Chromium
// when no test holds it; release gives it back.
func acquireBrowser(t *testing.T) (browser context.Context, release func()) {
	t.Helper()
	b := &sharedBrowser
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.users == 0 {
		profile, err := os.MkdirTemp("", "toolpool-e2e-chromium-")
		if err != nil {
			t.Fatal(err)
		}
		// The network of this machine is closed, so everything that would
		// reach out is off. Headless Chromium (the new headless mode, the
		// whole browser) also builds its address bar's WebUI popup in a
		// renderer of its own for every window, so for every test's
		// browser context: about 2 s of CPU each, for a popup no test
		// opens. Those features are off (the experiment: the browser's
		// CPU at start with one context, 6.6 s -> 3.2 s; each further
		// context, 2.2 s -> 0.6 s).
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(findChromium(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-features", "WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup,PreloadTopChromeWebUI"),
			chromedp.UserDataDir(profile), chromedp.WindowSize(1400, 1000),
		}
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(actx)
		closeAll := func() {
			cancel()
			cancelAlloc()
			os.RemoveAll(profile)
		}
		if err := chromedp.Do(ctx); err != nil {
			closeAll()
			t.Fatalf("start chromium: %v", err)
		}
		b.ctx, b.cancel = ctx, closeAll
	}
	b.users++
	return b.ctx, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.users--; b.users == 0 {
			b.cancel()
			b.ctx, b.cancel = nil, nil
		}
	}
}

// newBrowser opens a tab in a fresh browser context of the shared headless
// Chromium: nothing of another test's (cookies, sessions, storage) is
// seen in it. The context is disposed of when t ends.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	browser, release := acquireBrowser(t)
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(func() {
		cancel()
		release()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab in a new browser context: %v", err)
	}
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

// How often the tests look at the browser for what they wait for. Each
// look is a round trip through Chromium's DevTools protocol (its browser
// process, then the page's renderer): chromedp's own retry of a query is
// every 5 ms and natstest.Eventually's every 10 ms, which kept Chromium
// busy for as long as a wait lasted (a replay, a backlog building up, a
// history sample 10 s away). What the tests wait for changes at most
// about once a second (the console refreshes its live parts every second,
// a replay's progress every 500 ms), so a look every 100 ms, and a page
// reloaded every 500 ms, see it as soon as it matters.
const (
	pagePoll   = 100 * time.Millisecond
	reloadPoll = 500 * time.Millisecond
)

// waitVisible is chromedp.WaitVisible looking again every pagePoll.
func waitVisible(sel chromedp.CSS) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(sel, chromedp.RetryInterval(pagePoll))
}

// eventuallyOnPage is eventually for a condition that reads the page:
// cond runs every pagePoll.
func eventuallyOnPage(t *testing.T, what string, cond func() bool) {
	t.Helper()
	pollEvery(t, pagePoll, what, cond)
}

// eventuallyReloaded is eventually for a condition that loads a page
// again: cond runs every reloadPoll.
func eventuallyReloaded(t *testing.T, what string, cond func() bool) {
	t.Helper()
	pollEvery(t, reloadPoll, what, cond)
}

// textOf is the text of the first element sel matches ("" when none).
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return strings.TrimSpace(eval[string](t, ctx, `(document.querySelector(`+strconv.Quote(sel)+`)||{}).textContent||""`))
}

// screenshot writes the page as name: in docs/console when asked to
// (shotsDir), else in the test's temporary folder.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	dir := shotsDir(t, consoleShots)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
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

// openConsole starts a browser and logs it in to p's console as alice.
func openConsole(t *testing.T, p *consolePool) context.Context {
	t.Helper()
	ctx := newBrowser(t)
	browse(t, ctx, "log in", chromedp.Navigate(p.url("/ui/login")), waitVisible(css(`input[name="token"]`)),
		chromedp.SendKeys(css(`input[name="token"]`), p.token), chromedp.Submit(css(`input[name="token"]`)),
		waitVisible(css("#tools")))
	return ctx
}

// The console refuses what is not an operator's: no page without a login,
// a wrong token, a forged cross-site POST, a POST without a session.
func TestConsoleAccess(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	p := startConsolePool(t)

	resp, err := http.Get(p.url("/ui/overview.frag"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusUnauthorized && resp.Request.URL.Path != "/ui/login" {
		t.Errorf("GET /ui/overview.frag without a session: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	browse(t, ctx, "open /ui/ without a token", chromedp.Navigate(p.url("/ui/")), waitVisible(css(`input[name="token"]`)))
	loc := value(t, ctx, "location", chromedp.Location())
	if !strings.HasSuffix(loc, "/ui/login") || textOf(t, ctx, "#tools") != "" {
		t.Errorf("without a token the browser is at %s, overview %q; want the login page and no overview", loc, textOf(t, ctx, "#tools"))
	}
	browse(t, ctx, "log in with a wrong token", chromedp.SendKeys(css(`input[name="token"]`), "not-the-operator-token-000000"),
		chromedp.Submit(css(`input[name="token"]`)), waitVisible(css("#login-error")))
	// The agents' API keys are no operator tokens; the operator's is.
	browse(t, ctx, "log in", chromedp.SendKeys(css(`input[name="token"]`), p.token), chromedp.Submit(css(`input[name="token"]`)),
		waitVisible(css("#tools")))
	if who := textOf(t, ctx, ".who span"); who != "alice" {
		t.Errorf("logged in as %q, want alice", who)
	}

	p.call(t, "echo", `{"text":"the consumer exists"}`)
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
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusSeeOther || p.consumerPaused(t, "echo") {
		t.Errorf("a POST without a session: %d", resp.StatusCode)
	}
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
