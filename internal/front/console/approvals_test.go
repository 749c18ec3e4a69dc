package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/front/console"
)

// fakeApprovals is an approval store in memory with the real one's
// contract: pending first, decided once, errors by kind.
type fakeApprovals struct {
	mu      sync.Mutex
	recs    []console.ApprovalRecord
	decided []string // "id approve by via reason", in order
}

func (f *fakeApprovals) List(_ context.Context, all bool) ([]console.ApprovalRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var pending, decided []console.ApprovalRecord
	for _, r := range f.recs {
		if r.State == console.ApprovalPending {
			pending = append(pending, r)
		} else if all {
			decided = append([]console.ApprovalRecord{r}, decided...)
		}
	}
	return append(pending, decided...), nil
}

func (f *fakeApprovals) Get(_ context.Context, id string) (console.ApprovalRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.recs {
		if r.ID == id {
			return r, nil
		}
	}
	return console.ApprovalRecord{}, console.ErrApprovalNotFound
}

func (f *fakeApprovals) Decide(_ context.Context, id string, approve bool, by, reason, via string) (console.ApprovalRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.recs {
		r := &f.recs[i]
		if r.ID != id {
			continue
		}
		if r.State != console.ApprovalPending {
			return *r, fmt.Errorf("%w: approval %s was already %s by %s", console.ErrAlreadyDecided, id, r.State, r.DecidedBy)
		}
		r.State, r.DecidedBy, r.Reason, r.Via, r.DecidedAt = console.ApprovalDenied, by, reason, via, time.Now()
		if approve {
			r.State = console.ApprovalApproved
		}
		f.decided = append(f.decided, fmt.Sprint(id, " ", approve, " ", by, " ", via, " ", reason))
		return *r, nil
	}
	return console.ApprovalRecord{}, console.ErrApprovalNotFound
}

func (f *fakeApprovals) decisions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.decided...)
}

// hostile is attacker-controlled text: markup, both quotes, a closing tag.
const hostile = `</pre><script>alert("x")</script><img src=x onerror='alert(1)'>`

const (
	heldID  = "ap-0123456789abcdef0123"
	otherID = "ap-aaaaaaaaaaaaaaaaaaaa"
)

func newFakeApprovals() *fakeApprovals {
	now := time.Now()
	return &fakeApprovals{recs: []console.ApprovalRecord{
		{ID: heldID, Tool: "write_file", Input: []byte(`{"path":"/etc/` + strings.ReplaceAll(hostile, `"`, `\"`) + `","n":1}`),
			Tenant: "acme" + hostile, Session: "sess" + hostile, CallID: "toolu_" + hostile, KeyName: "ci-bot",
			Binding: strings.Repeat("ab", 32), CreatedAt: now.Add(-3 * time.Minute), Timeout: 15 * time.Minute, State: console.ApprovalPending},
		{ID: otherID, Tool: "run", Input: []byte(`{"cmd":"ls"}`), Tenant: "acme", CallID: "toolu_2",
			Binding: strings.Repeat("cd", 32), CreatedAt: now.Add(-time.Hour), Timeout: 15 * time.Minute,
			State: console.ApprovalApproved, DecidedBy: "bob", DecidedAt: now.Add(-50 * time.Minute), Reason: "fine", Via: "cli"},
	}}
}

// loggedIn returns a client logged in as alice and the session's CSRF
// token.
func (b *bundle) loggedIn(t *testing.T) (*http.Client, string) {
	t.Helper()
	c := client(t)
	if resp := b.post(t, c, "/ui/login", url.Values{"token": {aliceToken}}, b.srv.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	_, page := b.get(t, c, "/ui/")
	m := csrfMeta.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the overview:\n%s", page)
	}
	return c, m[1]
}

// The Approvals page lists a pending call with its input, session, tenant,
// call id, binding and time left, escaping what the caller sent; a deny
// with a reason is recorded as alice's, via the console, logged, and shown
// below; a second decision is refused naming the first.
func TestApprovalsPage(t *testing.T) {
	t.Parallel()
	fa := newFakeApprovals()
	b := setup(t, func(cfg *console.Config) { cfg.Approvals = fa })
	c, csrf := b.loggedIn(t)

	resp, page := b.get(t, c, "/ui/approvals")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/approvals: %d\n%s", resp.StatusCode, page)
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("Content-Security-Policy %q", resp.Header.Get("Content-Security-Policy"))
	}
	for _, want := range []string{
		`id="` + heldID + `"`, `action="/ui/approvals/` + heldID + `"`, `value="approve"`, `value="deny"`,
		`name="csrf" value="` + csrf + `"`, strings.Repeat("ab", 32), "ci-bot", "write_file",
		`&#34;path&#34;: &#34;/etc/&lt;/pre&gt;&lt;script&gt;alert(\&#34;x\&#34;)&lt;/script&gt;`, // the input, indented and escaped
		"acme&lt;/pre&gt;&lt;script&gt;", "sess&lt;/pre&gt;", "toolu_&lt;/pre&gt;", // tenant, session, call id
		"1 pending", `<tr data-approval="` + otherID + `"`, "bob", "fine", "3m ago",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "<img") || strings.Contains(page, "onerror='") {
		t.Errorf("the page carries the caller's markup unescaped:\n%s", page)
	}
	if i, j := strings.Index(page, heldID), strings.Index(page, otherID); i < 0 || j < i {
		t.Errorf("the pending approval is not listed before the decided one (%d, %d)", i, j)
	}

	// Without the token, or from another origin, nothing is decided.
	for _, tc := range []struct {
		name   string
		form   url.Values
		origin string
	}{
		{"no csrf token", url.Values{"decision": {"deny"}}, b.srv.URL},
		{"a wrong csrf token", url.Values{"decision": {"deny"}, "csrf": {strings.Repeat("0", len(csrf))}}, b.srv.URL},
		{"another origin", url.Values{"decision": {"deny"}, "csrf": {csrf}}, "http://evil.example"},
	} {
		if resp := b.post(t, c, "/ui/approvals/"+heldID, tc.form, tc.origin); resp.StatusCode != http.StatusForbidden {
			t.Errorf("decide with %s: %d, want 403", tc.name, resp.StatusCode)
		}
	}
	if resp := b.post(t, client(t), "/ui/approvals/"+heldID, url.Values{"decision": {"approve"}, "csrf": {csrf}}, b.srv.URL); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("decide without a session: %d, want 401", resp.StatusCode)
	}
	if d := fa.decisions(); len(d) != 0 {
		t.Fatalf("refused requests decided %v", d)
	}

	resp = b.post(t, c, "/ui/approvals/"+heldID, url.Values{"decision": {"deny"}, "reason": {"  not on prod <b>now</b> "}, "csrf": {csrf}}, b.srv.URL)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/ui/approvals?decided="+heldID {
		t.Fatalf("deny: %d to %q", resp.StatusCode, loc)
	}
	if d := fa.decisions(); len(d) != 1 || d[0] != heldID+" false alice console not on prod <b>now</b>" {
		t.Fatalf("decisions %q, want one denial by alice via the console with the reason", d)
	}
	_, page = b.get(t, c, "/ui/approvals?decided="+heldID)
	for _, want := range []string{"Approval " + heldID + " (write_file) denied.", "0 pending", `class="state-denied"`,
		`<td class="by">alice</td>`, "not on prod &lt;b&gt;now&lt;/b&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("after the denial the page lacks %q", want)
		}
	}
	_, one := b.get(t, c, "/ui/approvals/"+heldID)
	if !strings.Contains(one, `denied by <b class="by">alice</b> via console`) || strings.Contains(one, `class="decide"`) {
		t.Errorf("the approval's own page after the denial:\n%s", one)
	}
	if logs := b.log.String(); !strings.Contains(logs, `msg="console: approval decided" component=console operator=alice approval=`+heldID+` tool=write_file`) ||
		!strings.Contains(logs, `decision=denied reason="not on prod <b>now</b>"`) {
		t.Errorf("audit log lacks the decision with its operator:\n%s", logs)
	}

	// Decided once: the second decision is refused, naming the first.
	resp, body := b.postBody(t, c, "/ui/approvals/"+heldID, url.Values{"decision": {"approve"}, "csrf": {csrf}})
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already denied by alice") {
		t.Errorf("a second decision: %d\n%s", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		path string
		form url.Values
		want int
		msg  string
	}{
		{"/ui/approvals/" + otherID, url.Values{"decision": {"maybe"}}, http.StatusBadRequest, "decision: want approve or deny"},
		{"/ui/approvals/" + otherID, url.Values{"decision": {"deny"}, "reason": {strings.Repeat("é", 1001)}}, http.StatusBadRequest, "reason: at most 1000 characters, got 1001"},
		{"/ui/approvals/" + otherID, url.Values{"decision": {"deny"}, "reason": {"two\nlines"}}, http.StatusBadRequest, "reason: must be text on one line"},
		{"/ui/approvals/ap-ffffffffffffffffffff", url.Values{"decision": {"deny"}}, http.StatusNotFound, "not recorded"},
		{"/ui/approvals/ap-..%2F..%2Fdlq", url.Values{"decision": {"deny"}}, http.StatusNotFound, ""},
		{"/ui/approvals/AP-0123456789ABCDEF0123", url.Values{"decision": {"deny"}}, http.StatusNotFound, ""},
	} {
		tc.form.Set("csrf", csrf)
		if resp, body := b.postBody(t, c, tc.path, tc.form); resp.StatusCode != tc.want || !strings.Contains(body, tc.msg) {
			t.Errorf("POST %s %v: %d, want %d with %q\n%s", tc.path, tc.form, resp.StatusCode, tc.want, tc.msg, body)
		}
	}
	if d := fa.decisions(); len(d) != 1 {
		t.Errorf("bad requests decided: %q", d)
	}
	for path, want := range map[string]int{"/ui/approvals/ap-ffffffffffffffffffff": 404, "/ui/approvals/nope": 404, "/ui/approvals/" + otherID: 200} {
		if resp, _ := b.get(t, c, path); resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// Without an approval store the page says so, and a POST decides nothing.
func TestApprovalsOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, csrf := b.loggedIn(t)
	if resp, page := b.get(t, c, "/ui/approvals"); resp.StatusCode != http.StatusOK || !strings.Contains(page, "not enabled") {
		t.Errorf("GET /ui/approvals without a store: %d\n%s", resp.StatusCode, page)
	}
	if resp, _ := b.postBody(t, c, "/ui/approvals/"+heldID, url.Values{"decision": {"deny"}, "csrf": {csrf}}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("decide without a store: %d, want 404", resp.StatusCode)
	}
}

// postBody posts form from the console's own origin and returns the
// answer's body too.
func (b *bundle) postBody(t *testing.T, c *http.Client, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.srv.URL)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}
