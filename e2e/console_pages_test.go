package e2e_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The overview's counts rise while calls run (polled, not reloaded); a
// tool's page shows its catalog entry without secrets and its workers'
// build; pause stops a tool's calls fleet-wide and resume restarts them.
func TestConsoleOverviewAndTool(t *testing.T) {
	t.Parallel()
	p := startConsolePool(t)
	ctx := openConsole(t, p)

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
		browse(t, ctx, "open the overview", chromedp.Navigate(p.url("/ui/")), waitVisible(css("#tools")))
		var first int
		eventuallyOnPage(t, "the overview to count sleep's results", func() bool { first = okCount(); return first > 0 })
		eventuallyOnPage(t, "sleep's count to rise on the page (polled, not reloaded)", func() bool { return okCount() > first })
	})

	t.Run("a tool's catalog entry shows no secrets", func(t *testing.T) {
		browse(t, ctx, "open hook's page", chromedp.Navigate(p.url("/ui/tools/hook")), waitVisible(css("table.kv pre")))
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

	t.Run("overview screenshot", func(t *testing.T) {
		if out := p.call(t, "flaky", `{"fail":"404"}`); !strings.Contains(out, "is_error") {
			t.Errorf("flaky's answer %s; want an error", out)
		}
		browse(t, ctx, "open the overview", chromedp.Navigate(p.url("/ui/")), waitVisible(css(`tr[data-tool="flaky"] td.errors span`)))
		screenshot(t, ctx, "overview.png")
	})

	t.Run("pause stops a tool's calls fleet-wide and resume restarts them", func(t *testing.T) {
		p.call(t, "echo", `{"text":"before"}`) // the consumer exists
		browse(t, ctx, "pause echo", chromedp.Navigate(p.url("/ui/tools/echo")), waitVisible(css("#pause")),
			chromedp.Click(css("#pause")), waitVisible(css("#resume")))
		if !p.consumerPaused(t, "echo") {
			t.Fatal("echo's consumer is not paused after the page's pause")
		}
		answer := make(chan string, 1)
		go func() { answer <- p.call(t, "echo", `{"text":"while paused"}`) }()
		eventuallyOnPage(t, "the tool page to show the paused call queued", func() bool {
			return textOf(t, ctx, "#toolstate td.queued") == "1"
		})
		select {
		case out := <-answer:
			t.Fatalf("a call to the paused tool was answered: %s", out)
		default:
		}
		browse(t, ctx, "resume echo", chromedp.Click(css("#resume")), waitVisible(css("#pause")))
		if out := <-answer; !strings.Contains(out, "while paused") {
			t.Errorf("the call after resume: %s", out)
		}
	})
}

// The live tail shows results, filtered, and pauses; a result links to
// its call's page, which lists the failed attempt before the one that
// answered, and to its trace through --trace-url.
func TestConsoleLiveCalls(t *testing.T) {
	t.Parallel()
	p := startConsolePoolWith(t, hookCatalog, "--trace-url", "http://127.0.0.1:16686/trace/{trace_id}")
	ctx := openConsole(t, p)

	t.Run("the live tail shows results, filtered, and pauses", func(t *testing.T) {
		browse(t, ctx, "open the tail", chromedp.Navigate(p.url("/ui/tail?tool=echo")), waitVisible(css("#tail")))
		p.call(t, "echo", `{"text":"tailed"}`)
		eventuallyOnPage(t, "the tail to show echo's result", func() bool { return strings.Contains(textOf(t, ctx, "#tail tbody"), "echo") })
		if body := textOf(t, ctx, "#tail tbody"); strings.Contains(body, "sleep") || !strings.Contains(body, "ok") {
			t.Errorf("tail filtered on echo shows %q", body)
		}
		browse(t, ctx, "pause the tail", chromedp.Click(css("#tail-pause")))
		before := eval[int](t, ctx, `document.querySelectorAll("#tail tbody tr").length`)
		p.call(t, "echo", `{"text":"while the tail is paused"}`)
		eventuallyOnPage(t, "the paused tail to see the new result waiting", func() bool {
			return eval[int](t, ctx, `+(document.getElementById("tail").dataset.waiting || 0)`) >= 1
		})
		if after := eval[int](t, ctx, `document.querySelectorAll("#tail tbody tr").length`); after != before {
			t.Errorf("the paused tail grew from %d to %d rows", before, after)
		}
		browse(t, ctx, "resume the tail", chromedp.Click(css("#tail-pause")))
		eventuallyOnPage(t, "the resumed tail to show the result", func() bool {
			return eval[int](t, ctx, `document.querySelectorAll("#tail tbody tr").length`) > before
		})
	})

	t.Run("a call links to its attempts and its trace", func(t *testing.T) {
		browse(t, ctx, "open the tail", chromedp.Navigate(p.url("/ui/tail?tool=flaky")), waitVisible(css("#tail")))
		if out := p.call(t, "flaky", `{"fail":"503","times":1}`); !strings.Contains(out, "ok after") {
			t.Fatalf("flaky's answer %s; want a success after one failure", out)
		}
		eventuallyOnPage(t, "the tail to show flaky's result with its call", func() bool {
			return eval[int](t, ctx, `document.querySelectorAll("#tail tbody td.call a").length`) > 0
		})
		trace := value(t, ctx, "the trace link", chromedp.AttributeValue(css(`#tail tbody td.trace a`), "href")).Value
		if !strings.HasPrefix(trace, "http://127.0.0.1:16686/trace/") || len(trace) != len("http://127.0.0.1:16686/trace/")+32 {
			t.Errorf("the tail's trace link %q", trace)
		}
		browse(t, ctx, "open the call", chromedp.Click(css(`#tail tbody td.call a`)), waitVisible(css("#attempts")))
		if outcome := textOf(t, ctx, "#outcome"); outcome != "ok" {
			t.Errorf("the call's outcome %q, want ok", outcome)
		}
		if att := textOf(t, ctx, "#attempts tbody"); !strings.Contains(att, "http_503") {
			t.Errorf("the call's attempts %q, want the failed first one (http_503)", att)
		}
		if got := value(t, ctx, "the call's trace link", chromedp.AttributeValue(css("#trace-link"), "href")).Value; got != trace {
			t.Errorf("the call's trace link %q, want the tail's %q", got, trace)
		}
		screenshot(t, ctx, "call.png")
	})
}

// A backlog in a real pool: ten 4-second calls on a tool with two slots
// back up past a 2-second --backlog-age; the overview turns amber naming
// the tool and its oldest queued call, the charts draw the history the
// orchestrator samples every 10 s, and the badge is green again once the
// queue drained.
func TestConsoleBacklogAndHistory(t *testing.T) {
	t.Parallel()
	p := startConsolePoolWith(t, hookCatalog, "--workers", "1", "--concurrency", "2", "--backlog-age", "2s", "--admit-by-queue-wait=false")
	ctx := openConsole(t, p)
	done := make(chan struct{})
	for range 10 {
		go func() {
			defer func() { done <- struct{}{} }()
			p.call(t, "sleep", `{"ms":4000}`)
		}()
	}
	browse(t, ctx, "open the overview", chromedp.Navigate(p.url("/ui/")), waitVisible(css("#tools")))
	eventuallyOnPage(t, "the overview to show sleep backing up", func() bool {
		return textOf(t, ctx, `tr[data-tool="sleep"] td.backlog`) == "backing up" &&
			strings.Contains(eval[string](t, ctx, `document.getElementById("pool-health").className`), "warn")
	})
	if alarm := textOf(t, ctx, `.alarm[data-tool="sleep"]`); !strings.Contains(alarm, "sleep backing up") {
		t.Errorf("the alarm %q does not name sleep backing up", alarm)
	}
	if q, _ := strconv.Atoi(textOf(t, ctx, `tr[data-tool="sleep"] td.queued`)); q < 1 {
		t.Errorf("sleep's queued %d while backing up", q)
	}
	// The history: a sample every 10 s; two make a line.
	eventuallyReloaded(t, "the pool's charts to draw the queue", func() bool {
		browse(t, ctx, "reload the overview", chromedp.Navigate(p.url("/ui/")), waitVisible(css("#tools")))
		return eval[int](t, ctx, `document.querySelectorAll("#pool-queue polyline.s-queued, #pool-oldest polyline.s-oldest").length`) >= 2
	})
	if textOf(t, ctx, `tr[data-tool="sleep"] td.backlog`) == "backing up" {
		screenshot(t, ctx, "overview-backlog.png")
	}
	browse(t, ctx, "sleep's page", chromedp.Navigate(p.url("/ui/tools/sleep")), waitVisible(css("#tool-calls")))
	if n := eval[int](t, ctx, `document.querySelectorAll("#charts svg.chart").length`); n != 5 {
		t.Errorf("sleep's page draws %d charts, want 5", n)
	}
	eventuallyReloaded(t, "sleep's queue chart to draw a line", func() bool {
		browse(t, ctx, "reload sleep's page", chromedp.Navigate(p.url("/ui/tools/sleep")), waitVisible(css("#tool-calls")))
		return eval[int](t, ctx, `document.querySelectorAll("#tool-queue polyline.s-queued").length`) >= 1
	})
	screenshot(t, ctx, "tool-history.png")
	for range 10 {
		<-done
	}
	browse(t, ctx, "the overview", chromedp.Navigate(p.url("/ui/")), waitVisible(css("#tools")))
	eventuallyOnPage(t, "the badge to be green once the queue drained", func() bool {
		return strings.Contains(eval[string](t, ctx, `document.getElementById("pool-health").className`), "good")
	})
}
