package e2e_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolpool/toolpool/pkg/classify"
)

// approvalCatalog serves deploy, an exec tool every call of which waits
// for a person's approval.
const approvalCatalog = `version: 1
tools:
  - name: deploy
    description: Deploys a build; a person approves every call.
    input_schema: {type: object, properties: {target: {type: string}}}
    backend: exec
    exec: {command: [cat]}
    approval: always
`

// hostileInput, hostileID and hostileSession are what an agent controls,
// made to break out of the page's markup if it were not escaped.
const (
	hostileInput   = `{"target":"prod\"'</pre><script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">"}`
	hostileID      = `toolu_"'<script>window.__pwned=3</script>`
	hostileSession = `sess"'<img/src=x/onerror=window.__pwned=4>`
)

// login logs the browser in as alice.
func (p *consolePool) login(t *testing.T, ctx context.Context) {
	t.Helper()
	browse(t, ctx, "log in", chromedp.Navigate(p.url("/ui/login")), waitVisible(css(`input[name="token"]`)),
		chromedp.SendKeys(css(`input[name="token"]`), p.token), chromedp.Submit(css(`input[name="token"]`)),
		waitVisible(css("#tools")))
}

// An operator opens Approvals in a real browser, sees the held call of
// deploy with its input, session and call id (as text: nothing the agent
// sent runs in the page), denies it with a reason, and the record shows
// the denial by alice; the agent's call is answered not_approved with the
// reason.
func TestConsoleApprovals(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	p := startConsolePoolWith(t, approvalCatalog)

	answer := make(chan string, 1)
	go func() {
		body := `{"role":"assistant","content":[{"type":"tool_use","id":` + strconv.Quote(hostileID) + `,"name":"deploy","input":` + hostileInput + `}]}`
		req, _ := http.NewRequest(http.MethodPost, p.url("/v1/tool_calls"), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Toolpool-Session", hostileSession)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answer <- "POST: " + err.Error()
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		answer <- strconv.Itoa(resp.StatusCode) + " " + string(out)
	}()

	p.login(t, ctx)
	const pending = `#pending article[data-state="pending"]`
	eventuallyReloaded(t, "the held call on the Approvals page (the page must not say approvals are not enabled)", func() bool {
		browse(t, ctx, "open Approvals", chromedp.Navigate(p.url("/ui/approvals")), waitVisible(css("main h1")))
		return eval[int](t, ctx, `document.querySelectorAll(`+strconv.Quote(pending)+`).length`) == 1
	})
	id := value(t, ctx, "the approval's id", chromedp.AttributeValue(css(pending), "data-approval")).Value
	for sel, want := range map[string]string{
		pending + " td.tool": "deploy", pending + " td.call-id": hostileID, pending + " td.session": hostileSession,
		pending + " pre.input": `"target": "prod\"'</pre><script>window.__pwned=1</script>`,
	} {
		if got := textOf(t, ctx, sel); !strings.Contains(got, want) {
			t.Errorf("%s shows %q, want %q", sel, got, want)
		}
	}
	if b := textOf(t, ctx, pending+" code.binding"); len(b) != 64 {
		t.Errorf("the binding shown is %q, want a sha256 in hex", b)
	}
	if pwned := eval[bool](t, ctx, `window.__pwned !== undefined || document.querySelector("#pending script, #pending img") !== null`); pwned {
		t.Fatal("the agent's input, id or session became markup on the page")
	}
	screenshot(t, ctx, "approvals.png")

	const reason = "not during the freeze"
	browse(t, ctx, "deny with a reason", chromedp.SendKeys(css(pending+` input[name="reason"]`), reason),
		chromedp.Click(css(pending+" button.deny")), waitVisible(css("#decided-msg")))
	row := `#decided tr[data-approval="` + id + `"]`
	for sel, want := range map[string]string{row + " td.decision": "denied", row + " td.by": "alice", row + " td.reason": reason} {
		if got := textOf(t, ctx, sel); got != want {
			t.Errorf("after the denial %s shows %q, want %q", sel, got, want)
		}
	}
	if n := eval[int](t, ctx, `document.querySelectorAll(`+strconv.Quote(pending)+`).length`); n != 0 {
		t.Errorf("%d calls still pending after the denial", n)
	}
	out := <-answer
	var turn struct {
		Content []struct {
			IsError bool `json:"is_error"`
			Content []struct{ Text string }
		}
	}
	status, body, _ := strings.Cut(out, " ")
	if err := json.Unmarshal([]byte(body), &turn); err != nil || status != "200" || len(turn.Content) != 1 || !turn.Content[0].IsError ||
		len(turn.Content[0].Content) != 1 || turn.Content[0].Content[0].Text != classify.NotApprovedMessage("deploy", reason) {
		t.Errorf("the agent's call was answered %s; want is_error with the words of %s and the reason", out, classify.CodeNotApproved)
	}

	// Decided once: the approval's own page shows the decision and no
	// form, and a second decision is refused.
	browse(t, ctx, "open the approval", chromedp.Navigate(p.url("/ui/approvals/"+id)), waitVisible(css("article.approval")))
	if got := textOf(t, ctx, "article.approval td.decision"); !strings.Contains(got, "denied by alice via console") {
		t.Errorf("the approval's page says %q", got)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("form.decide").length`); n != 0 {
		t.Error("a decided approval still offers a decision")
	}
}
