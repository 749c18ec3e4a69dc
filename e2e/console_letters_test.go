package e2e_test

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// Dead letters in a real browser: one of flaky's is shown with its
// attempts and the model's last words and replayed from its page; a purge
// needs the typed confirmation; the list is newest first, groups by error
// code and finds a call by its id.
func TestConsoleDeadLetters(t *testing.T) {
	t.Parallel()
	p := startConsolePool(t)
	ctx := openConsole(t, p)

	t.Run("a dead letter of flaky is shown and replayed from the page", func(t *testing.T) {
		if out := p.call(t, "flaky", `{"fail":"503","times":10}`); !strings.Contains(out, "dead-lettered") {
			t.Fatalf("flaky's answer %s; want a dead letter", out)
		}
		browse(t, ctx, "list flaky's dead letters", chromedp.Navigate(p.url("/ui/dlq?tool=flaky")), waitVisible(css(`#letters tbody tr[data-seq]`)))
		seq := value(t, ctx, "read the seq", chromedp.AttributeValue(css(`#letters tbody tr[data-seq]`), "data-seq")).Value
		letter, _ := strconv.ParseUint(seq, 10, 64)
		browse(t, ctx, "open the entry", chromedp.Click(css(`#letters tbody tr[data-seq] a`)), waitVisible(css("#attempts")))
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
		if tr := textOf(t, ctx, "#trace"); len(tr) != 32 {
			t.Errorf("the dead letter's trace %q, want its trace id", tr)
		}
		screenshot(t, ctx, "dead-letter.png")
		browse(t, ctx, "replay it", chromedp.Click(css("#replay-one")), waitVisible(css("#act-go")),
			chromedp.SetValue(css(`input[name="rate"]`), "5"), chromedp.Click(css("#act-go")),
			waitVisible(css(`#act-dialog[data-done="done"]`)), waitVisible(css("#act-calls tbody tr")))
		if state := textOf(t, ctx, "#act-state"); !strings.Contains(state, "replayed 1") {
			t.Errorf("replay progress %q, want 1 replayed", state)
		}
		// flaky fails its first 10 attempts again: the replayed call's own
		// result is an is_error, shown per call.
		if row := textOf(t, ctx, "#act-calls tbody tr"); !strings.Contains(row, seq) || !strings.Contains(row, "is_error") {
			t.Errorf("replay's call row %q, want seq %s with its is_error result", row, seq)
		}
		screenshot(t, ctx, "replay.png")
		browse(t, ctx, "back to the list", chromedp.Navigate(p.url("/ui/dlq?tool=flaky")), waitVisible(css("#letters")))
		still := eval[int](t, ctx, `document.querySelectorAll('#letters tr[data-seq="`+seq+`"]').length`)
		if still != 0 || p.hasLetter(t, letter) {
			t.Errorf("dead letter %s is still listed (%d) or stored after its replay", seq, still)
		}
	})

	t.Run("purge requires the typed confirmation", func(t *testing.T) {
		p.call(t, "flaky", `{"fail":"503","times":10}`)
		browse(t, ctx, "list", chromedp.Navigate(p.url("/ui/dlq?tool=flaky&code=http_503")), waitVisible(css(`#letters tbody tr[data-seq]`)))
		seq := value(t, ctx, "read the seq", chromedp.AttributeValue(css(`#letters tbody tr[data-seq]`), "data-seq")).Value
		n, _ := strconv.ParseUint(seq, 10, 64)
		browse(t, ctx, "purge without confirming", chromedp.Click(css(`#letters tbody tr[data-seq] input[name="seq"]`)),
			chromedp.Click(css(`button[data-act="purge"][data-scope="selected"]`)), waitVisible(css("#confirm")),
			chromedp.SendKeys(css("#confirm"), "yes"), chromedp.Click(css("#act-go")))
		eventuallyOnPage(t, "the refusal to show", func() bool { return textOf(t, ctx, "#act-error") != "" })
		if msg := textOf(t, ctx, "#act-error"); !strings.Contains(msg, "purge") || !p.hasLetter(t, n) {
			t.Errorf("an unconfirmed purge: message %q, letter kept %v; want a refusal that keeps it", msg, p.hasLetter(t, n))
		}
		eval[bool](t, ctx, `(document.getElementById("confirm").value = "") === ""`)
		browse(t, ctx, "purge, confirmed", chromedp.SendKeys(css("#confirm"), "purge"),
			chromedp.Click(css("#act-go")), waitVisible(css(`#act-dialog[data-done="done"]`)))
		if p.hasLetter(t, n) {
			t.Errorf("dead letter %d is stored after a confirmed purge (%s)", n, textOf(t, ctx, "#act-state"))
		}
	})

	t.Run("newest first, grouped by error code, found by call id", func(t *testing.T) {
		// Three more of flaky's, of two codes, at once (each waits out its
		// retries' backoff).
		var calls sync.WaitGroup
		for _, fail := range []string{"503", "429", "503"} {
			calls.Go(func() { p.call(t, "flaky", `{"fail":"`+fail+`","times":10}`) })
		}
		calls.Wait()
		browse(t, ctx, "list", chromedp.Navigate(p.url("/ui/dlq")), waitVisible(css(`#letters tbody tr[data-seq]`)))
		seqs := eval[[]string](t, ctx, `[...document.querySelectorAll("#letters tbody tr[data-seq]")].map(r => r.dataset.seq)`)
		for i := 1; i < len(seqs); i++ {
			a, _ := strconv.Atoi(seqs[i-1])
			b, _ := strconv.Atoi(seqs[i])
			if a <= b {
				t.Errorf("the list is not newest first: %v", seqs)
				break
			}
		}
		browse(t, ctx, "oldest first", chromedp.Click(css("#order-oldest")), waitVisible(css("#order-newest")))
		if first := value(t, ctx, "the first row", chromedp.AttributeValue(css(`#letters tbody tr[data-seq]`), "data-seq")).Value; first != seqs[len(seqs)-1] {
			t.Errorf("oldest first starts at %s, want %s", first, seqs[len(seqs)-1])
		}
		browse(t, ctx, "group by code", chromedp.Navigate(p.url("/ui/dlq?tool=flaky")), waitVisible(css("#view-codes")),
			chromedp.Click(css("#view-codes")), waitVisible(css("#groups")))
		// http_503: this test's two and what the replay above dead-lettered
		// again; http_429: this one's.
		groups := eval[[]string](t, ctx, `[...document.querySelectorAll("#groups tbody tr[data-code]")].map(r => r.dataset.code + "=" + r.cells[2].textContent)`)
		if len(groups) != 2 || !strings.HasPrefix(groups[0], "http_503=") || groups[0] < "http_503=2" || groups[1] != "http_429=1" {
			t.Errorf("flaky's groups %v, want http_503 (at least 2) then http_429=1", groups)
		}
		screenshot(t, ctx, "dead-letters-by-code.png")
		browse(t, ctx, "open a group", chromedp.Click(css(`#groups tr[data-code="http_429"] a`)), waitVisible(css(`#letters tbody tr[data-seq]`)))
		if n := eval[int](t, ctx, `document.querySelectorAll("#letters tbody tr[data-seq]").length`); n != 1 {
			t.Errorf("http_429's group lists %d letters, want 1", n)
		}
		id := textOf(t, ctx, `#letters tbody tr[data-seq] td.callid`)
		if id == "" {
			t.Fatal("the list shows no call id")
		}
		browse(t, ctx, "the unfiltered list", chromedp.Navigate(p.url("/ui/dlq")), waitVisible(css(`input[name="call"]`)))
		// Its rows are visible too: only the page the search loads, whose
		// body is not marked, answers.
		eval[bool](t, ctx, `(document.body.dataset.before = "search") !== ""`)
		browse(t, ctx, "search by the call id", chromedp.SendKeys(css(`input[name="call"]`), id), chromedp.Submit(css(`input[name="call"]`)),
			waitVisible(css(`body:not([data-before]) #letters tbody tr[data-seq]`)))
		if got := eval[[]string](t, ctx, `[...document.querySelectorAll("#letters tbody td.callid")].map(c => c.textContent)`); len(got) != 1 || got[0] != id {
			t.Errorf("search by call id %q found %v", id, got)
		}
		screenshot(t, ctx, "dead-letters.png")
	})
}

// renderLetters is how many dead letters TestConsoleRenderTimes seeds:
// renderLettersDefault, or TOOLPOOL_RENDER_LETTERS (at least
// renderLettersMin). The figures of docs/console.md and
// docs/performance.md are of 100,000:
//
//	TOOLPOOL_RENDER_LETTERS=100000 go test -run TestConsoleRenderTimes -v ./e2e/
func renderLetters(t *testing.T) int {
	t.Helper()
	v := os.Getenv("TOOLPOOL_RENDER_LETTERS")
	if v == "" {
		return renderLettersDefault
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < renderLettersMin {
		t.Fatalf("TOOLPOOL_RENDER_LETTERS=%q: want a number of dead letters, at least %d", v, renderLettersMin)
	}
	return n
}

const (
	// renderLettersDefault keeps the default run short (seeding 100,000
	// took 30 s of a loaded machine, the pages reading them all as much
	// again) and still fills every view: the 50 tools, group by code's
	// newest 10,000, the call id looked up.
	renderLettersDefault = 10000
	// renderLettersMin holds the call id the test looks up (seed-4242).
	renderLettersMin = 4243
)

// Render times with many dead letters (renderLetters) of 50 tools,
// measured by the browser (logged, not asserted: the machine's load
// decides them).
func TestConsoleRenderTimes(t *testing.T) {
	t.Parallel()
	n := renderLetters(t)
	p := startConsolePool(t)
	ctx := openConsole(t, p)
	seedLetters(t, p.js, n, 50)
	browse(t, ctx, "overview", chromedp.Navigate(p.url("/ui/")), waitVisible(css(`tr[data-tool="tool-49"]`)))
	over := loadTime(t, ctx)
	browse(t, ctx, "newest dead letters", chromedp.Navigate(p.url("/ui/dlq")), waitVisible(css(`#letters tbody tr[data-seq]`)))
	newest := loadTime(t, ctx)
	browse(t, ctx, "filtered dead letters", chromedp.Navigate(p.url("/ui/dlq?tool=tool-07&reason=exhausted&code=http_503")), waitVisible(css(`#letters tbody tr[data-seq]`)))
	filtered := loadTime(t, ctx)
	browse(t, ctx, "text search", chromedp.Navigate(p.url("/ui/dlq?q=needle-31")), waitVisible(css(`#letters tbody tr[data-seq]`)))
	search := loadTime(t, ctx)
	rows := eval[int](t, ctx, `document.querySelectorAll("#letters tbody tr[data-seq]").length`)
	browse(t, ctx, "call id", chromedp.Navigate(p.url("/ui/dlq?call=seed-4242")), waitVisible(css(`#letters tbody tr[data-seq]`)))
	byCall := loadTime(t, ctx)
	browse(t, ctx, "grouped by code", chromedp.Navigate(p.url("/ui/dlq?view=codes")), waitVisible(css(`#groups tbody tr[data-code]`)))
	grouped := loadTime(t, ctx)
	browse(t, ctx, "text search matching nothing", chromedp.Navigate(p.url("/ui/dlq?q=no-such-text")), waitVisible(css(`#letters tbody tr.empty`)))
	nothing := loadTime(t, ctx)
	t.Logf("browser-measured load times with %d dead letters over 50 tools: overview %v, newest first %v, filtered %v, "+
		"text search finding its page %v (%d rows), call id %v, grouped by code (newest 10,000) %v, text search matching nothing (reads all) %v",
		n, over, newest, filtered, search, rows, byCall, grouped, nothing)
}
