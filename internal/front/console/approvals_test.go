package console_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/front/console"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/tools"
)

// hostile is attacker-controlled text: markup, both quotes, a closing tag.
const hostile = `</pre><script>alert("x")</script><img src=x onerror='alert(1)'>`

// heldCall is a call of write_file that needs approval, with what the
// caller controls made hostile.
func heldCall() *policy.Call {
	return &policy.Call{Tenant: "acme" + hostile, Key: "ci-bot", Session: "sess" + hostile, ID: "toolu_" + hostile, Tool: "write_file",
		Input: []byte(`{"path":"/etc/` + strings.ReplaceAll(hostile, `"`, `\"`) + `","n":1}`),
		Info:  pooltype.ToolInfo{Approval: &tools.ApprovalRule{Timeout: 15 * time.Minute}}}
}

// setupApprovals is a console with an approval store whose window of an
// approval's use is window (approval.Config.ResultsMaxAge; 0: the
// default).
func setupApprovals(t *testing.T, window time.Duration) (*bundle, *approval.Store) {
	t.Helper()
	var st *approval.Store
	b := setup(t, func(cfg *console.Config) {
		s, err := approval.New(approval.Config{JS: cfg.JetStream, Logger: cfg.Logger, ResultsMaxAge: window})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Stop(context.Background()) })
		st, cfg.Approvals = s, s
	})
	return b, st
}

// withApprovals gives the console a started approval store on b's server
// (its audit lines in the console's log) and holds two calls: write_file's,
// pending, and run's, approved by bob on the CLI. It returns the store and
// the two ids.
func withApprovals(t *testing.T) (*bundle, *approval.Store, string, string) {
	t.Helper()
	b, st := setupApprovals(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held, err := st.Hold(ctx, heldCall())
	if err != nil {
		t.Fatal(err)
	}
	other, err := st.Hold(ctx, &policy.Call{Tenant: "acme", ID: "toolu_2", Tool: "run", Input: []byte(`{"cmd":"ls"}`),
		Info: pooltype.ToolInfo{Approval: &tools.ApprovalRule{}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Decide(ctx, other.ID, true, "bob", "fine", approval.ViaCLI); err != nil {
		t.Fatal(err)
	}
	return b, st, held.ID, other.ID
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
	b, st, heldID, otherID := withApprovals(t)
	c, csrf := b.loggedIn(t)
	state := func(id string) approval.State {
		t.Helper()
		r, err := st.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return r.State
	}

	resp, page := b.get(t, c, "/ui/approvals")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/approvals: %d\n%s", resp.StatusCode, page)
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("Content-Security-Policy %q", resp.Header.Get("Content-Security-Policy"))
	}
	for _, want := range []string{
		`id="` + heldID + `"`, `action="/ui/approvals/` + heldID + `"`, `value="approve"`, `value="deny"`,
		`name="csrf" value="` + csrf + `"`, approval.Binding(heldCall().Tenant, "write_file", heldCall().Input), "ci-bot", "write_file",
		`&#34;path&#34;: &#34;/etc/&lt;/pre&gt;&lt;script&gt;alert(\&#34;x\&#34;)&lt;/script&gt;`, // the input, indented and escaped
		"acme&lt;/pre&gt;&lt;script&gt;", "sess&lt;/pre&gt;", "toolu_&lt;/pre&gt;", // tenant, session, call id
		"1 pending", `<tr data-approval="` + otherID + `"`, `<td class="by">bob</td><td>cli</td>`, "fine", "time left",
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
	if s := state(heldID); s != approval.StatePending {
		t.Fatalf("refused requests decided: %s", s)
	}

	resp = b.post(t, c, "/ui/approvals/"+heldID, url.Values{"decision": {"deny"}, "reason": {"  not on prod <b>now</b> "}, "csrf": {csrf}}, b.srv.URL)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/ui/approvals?decided="+heldID {
		t.Fatalf("deny: %d to %q", resp.StatusCode, loc)
	}
	if r, err := st.Get(context.Background(), heldID); err != nil || r.State != approval.StateDenied || r.DecidedBy != "alice" ||
		r.Via != approval.ViaConsole || r.Reason != "not on prod <b>now</b>" {
		t.Fatalf("the record after the denial: %+v, %v; want denied by alice via the console with the reason", r, err)
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
		!strings.Contains(logs, `decision=denied reason="not on prod <b>now</b>"`) || !strings.Contains(logs, `msg="approval decided"`) {
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
		{"/ui/approvals/" + otherID, url.Values{"decision": {"deny"}}, http.StatusConflict, "already approved by bob"},
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
	if s := state(otherID); s != approval.StateApproved {
		t.Errorf("bad requests changed run's approval: %s", s)
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
	if resp, _ := b.postBody(t, c, "/ui/approvals/ap-0123456789abcdef0123", url.Values{"decision": {"deny"}, "csrf": {csrf}}); resp.StatusCode != http.StatusNotFound {
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

// A flood of calls held for approval does not make the page unbounded:
// it lists the first 200 to time out and says how many more wait.
func TestApprovalsPageBounded(t *testing.T) {
	t.Parallel()
	b, st, _, _ := withApprovals(t)
	c, _ := b.loggedIn(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 204 { // and write_file's, held by withApprovals: 205
		if _, err := st.Hold(ctx, &policy.Call{Tenant: "acme", ID: "flood-" + strconv.Itoa(i), Tool: "run", Input: []byte(`{"n":1}`),
			Info: pooltype.ToolInfo{Approval: &tools.ApprovalRule{}}}); err != nil {
			t.Fatal(err)
		}
	}
	_, page := b.get(t, c, "/ui/approvals")
	if n := strings.Count(page, `<article class="approval state-pending"`); n != 200 || !strings.Contains(page, "200+5 pending") ||
		!strings.Contains(page, "and 5 more pending") {
		t.Errorf("with 205 pending the page lists %d cards (want 200) and says:\n%.300s", n, page[strings.Index(page, "<main>"):])
	}
}

// An approval is for one run: an approved call's page shows when it was
// let through; held again once its approval was spent, it is pending with
// its form and the earlier approval listed (escaped), and approving it
// on the page decides it again.
func TestApprovalPageHeldAgain(t *testing.T) {
	t.Parallel()
	const window = time.Second
	b, st := setupApprovals(t, window)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := heldCall()
	d, err := st.Hold(ctx, call)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Decide(ctx, d.ID, true, "bob"+hostile, "ticket"+hostile, approval.ViaCLI); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Use(ctx, call, d.ID); err != nil || got.State != policy.Approved {
		t.Fatalf("Use = %+v, %v", got, err)
	}
	c, csrf := b.loggedIn(t)
	_, one := b.get(t, c, "/ui/approvals/"+d.ID)
	if !strings.Contains(one, `class="used"`) || strings.Contains(one, "approved before") {
		t.Errorf("the page of a used approval lacks when it was let through:\n%s", one)
	}

	used, err := st.Get(ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(used.Written.Add(window)) + 200*time.Millisecond)
	if got, err := st.Hold(ctx, call); err != nil || got.State != policy.Pending {
		t.Fatalf("Hold after the window = %+v, %v", got, err)
	}
	_, one = b.get(t, c, "/ui/approvals/"+d.ID)
	for _, want := range []string{`data-state="pending"`, `class="decide"`, "approved before", `by <b class="by">bob&lt;/pre&gt;&lt;script&gt;`,
		"via cli", `<span class="reason">ticket&lt;/pre&gt;`} {
		if !strings.Contains(one, want) {
			t.Errorf("the page of the call held again lacks %q", want)
		}
	}
	if strings.Contains(one, "<script>") || strings.Contains(one, `class="used"`) {
		t.Errorf("the page of the call held again:\n%s", one)
	}

	resp := b.post(t, c, "/ui/approvals/"+d.ID, url.Values{"decision": {"approve"}, "csrf": {csrf}, "back": {"one"}}, b.srv.URL)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve again: %d", resp.StatusCode)
	}
	if r, err := st.Get(ctx, d.ID); err != nil || r.State != approval.StateApproved || r.DecidedBy != "alice" || len(r.Previous) != 1 ||
		r.Previous[0].ApprovedBy != "bob"+hostile {
		t.Fatalf("approved again on the page: %+v, %v", r, err)
	}
}
