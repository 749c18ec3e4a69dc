package mcpfront

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// heldGate stands in for the policy gate with an approval store: every
// call of the tool "held" needs approval. Its approval id derives from
// the call's tenant, session, id and input, as the real one's does; a
// call waits for the decision unless ctx says WithoutApprovalWait (then
// it is answered approval_pending, its id in the report). It also
// implements HostApprovals: the first decision stands.
type heldGate struct {
	mu        sync.Mutex
	decisions map[string]policy.Decision
	decided   []string // "id approve by reason", in order
	waits     []bool   // per call: did the gate wait
	held      []string // per call: its approval id
	keys      []string // per call: the key name the gate was given
	changed   chan struct{}
}

func newHeldGate() *heldGate {
	return &heldGate{decisions: map[string]policy.Decision{}, changed: make(chan struct{}, 16)}
}

func heldID(tenant, session, id string, input []byte) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + session + "\x00" + id + "\x00" + string(input)))
	return "ap-" + hex.EncodeToString(sum[:10])
}

func (g *heldGate) Decide(_ context.Context, id string, approve bool, by, reason string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if d, ok := g.decisions[id]; ok {
		return fmt.Errorf("approval %s was already decided by %s", id, d.By)
	}
	state := policy.Denied
	if approve {
		state = policy.Approved
	}
	g.decisions[id] = policy.Decision{ID: id, State: state, By: by, Reason: reason}
	g.decided = append(g.decided, fmt.Sprintf("%s %v %s %q", id, approve, by, reason))
	select {
	case g.changed <- struct{}{}:
	default:
	}
	return nil
}

func (g *heldGate) Dispatch(ctx context.Context, session string, calls []envelope.ToolUseBlock) ([]envelope.Result, error) {
	c := calls[0]
	if c.Name != "held" {
		return []envelope.Result{{CallID: c.ID, Tool: c.Name, Content: envelope.Text("ran " + c.Name)}}, nil
	}
	tenant := ""
	if k := policy.KeyNameFrom(ctx); k != "" {
		tenant = k
	}
	id := heldID(tenant, session, c.ID, c.Input)
	wait := policy.ApprovalWaitFrom(ctx)
	g.mu.Lock()
	g.waits = append(g.waits, wait)
	g.held = append(g.held, id)
	g.keys = append(g.keys, policy.KeyNameFrom(ctx))
	d, ok := g.decisions[id]
	g.mu.Unlock()
	if !ok && wait {
		select { // the test decides elsewhere, or the call is cancelled
		case <-g.changed:
			g.mu.Lock()
			d, ok = g.decisions[id]
			g.mu.Unlock()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if rep := policy.ReportFrom(ctx); rep != nil {
		rep.Approvals = []string{id}
	}
	r := envelope.Result{CallID: c.ID, Tool: c.Name, IsError: true, Class: envelope.ClassPermanent}
	switch {
	case !ok:
		r.Code, r.Content = classify.CodeApprovalPending, envelope.Text(classify.ApprovalPendingMessage(c.Name, 0))
	case d.State == policy.Approved:
		r = envelope.Result{CallID: c.ID, Tool: c.Name, Content: envelope.Text("ran held " + string(c.Input) + " approved by " + d.By)}
	default:
		r.Code, r.Content = classify.CodeNotApproved, envelope.Text(classify.NotApprovedMessage(c.Name, d.Reason))
	}
	return []envelope.Result{r}, nil
}

// heldOne waits for the first call to reach the gate, and returns its
// approval id.
func (g *heldGate) heldOne(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		held := append([]string(nil), g.held...)
		g.mu.Unlock()
		if len(held) > 0 {
			return held[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no call reached the gate")
	return ""
}

func (g *heldGate) snapshot() (decided []string, waits []bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.decided...), append([]bool(nil), g.waits...)
}

// dial26 opens a go-sdk client session of revision 2026-07-28 on url
// with the key token; elicit, when set, is its elicitation handler.
func dial26(t *testing.T, url, token string, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *mcp.ClientSession {
	t.Helper()
	var rt http.RoundTripper = http.DefaultTransport.(*http.Transport).Clone()
	if token != "" {
		rt = withBearer{token: token, next: rt}
	}
	hc := &http.Client{Transport: rt}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: elicit})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

const heldKey = "held-0123456789abcdef"

func heldServer(t *testing.T, g *heldGate, mod func(*Config)) string {
	t.Helper()
	ks, err := apikey.Parse(nil, []byte(`[{tenant: acme, name: ci-bot, key: `+heldKey+`}]`), "keys")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Dispatcher: g, Tools: staticTools, Keys: ks, HostApprovals: g}
	if mod != nil {
		mod(&cfg)
	}
	_, url := serve(t, cfg)
	return url
}

// A 2026-07-28 host that declares elicitation is asked (input_required,
// a form); its answer, on the retry, decides the approval, named after
// the key and the host, and the call runs — or is denied, with the
// host's reason told to the model.
func TestHostDecidesApproval(t *testing.T) {
	g := newHeldGate()
	url := heldServer(t, g, nil)
	var asked []*mcp.ElicitParams
	answer := map[string]any{"approve": true, "reason": "looks right"}
	cs := dial26(t, url, heldKey, func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = append(asked, req.Params)
		return &mcp.ElicitResult{Action: "accept", Content: answer}, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "held", Arguments: map[string]any{"path": "/etc/<hosts>"}})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("approved call: %+v, %v", res, err)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != `ran held {"path":"/etc/<hosts>"} approved by ci-bot via test-host` {
		t.Errorf("approved call ran as %q", got)
	}
	if len(asked) != 1 || asked[0].Mode != "form" || !strings.Contains(asked[0].Message, "run held with these arguments") ||
		!strings.Contains(asked[0].Message, `"path": "/etc/<hosts>"`) || !regexp.MustCompile(`\(ap-[0-9a-f]{20}\)`).MatchString(asked[0].Message) {
		t.Fatalf("asked %+v", asked)
	}
	decided, waits := g.snapshot()
	if len(decided) != 1 || !strings.HasSuffix(decided[0], ` true ci-bot via test-host "looks right"`) {
		t.Errorf("decisions %q", decided)
	}
	if len(waits) != 2 || waits[0] || waits[1] {
		t.Errorf("the gate waited %v; a host that is asked never makes it wait", waits)
	}
	if g.mu.Lock(); len(g.keys) != 2 || g.keys[0] != "ci-bot" || g.keys[1] != "ci-bot" {
		t.Errorf("key names given to the gate: %q", g.keys)
	}
	g.mu.Unlock()

	// Denied, with a reason the model reads.
	answer = map[string]any{"approve": false, "reason": "not /etc"}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "held", Arguments: map[string]any{"path": "/etc/passwd"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `they did not approve it (their reason: "not /etc")`) {
		t.Fatalf("denied call: %+v, %v", res, err)
	}
	if res.Meta["io.toolpool/code"] != classify.CodeNotApproved {
		t.Errorf("denied call's _meta %v", res.Meta)
	}
}

// A host that dismisses the form (cancel) decides nothing: the model
// reads that the call waits for approval, and the approval stays open.
func TestHostCancelsApproval(t *testing.T) {
	g := newHeldGate()
	url := heldServer(t, g, nil)
	cs := dial26(t, url, heldKey, func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "cancel"}, nil
	})
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "held", Arguments: map[string]any{}})
	if err != nil || !res.IsError || res.Meta["io.toolpool/code"] != classify.CodeApprovalPending {
		t.Fatalf("cancelled: %+v, %v", res, err)
	}
	if decided, _ := g.snapshot(); len(decided) != 0 {
		t.Errorf("decisions %q", decided)
	}
}

// A host without the elicitation capability is not asked: the gate waits
// for a decision made elsewhere (the CLI, the console), and the call runs
// once it comes.
func TestHostWithoutElicitationWaits(t *testing.T) {
	g := newHeldGate()
	url := heldServer(t, g, nil)
	cs := dial26(t, url, heldKey, nil)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "held", Arguments: map[string]any{"n": 1}})
		done <- res
	}()
	id := g.heldOne(t)
	if _, waits := g.snapshot(); len(waits) != 1 || !waits[0] {
		t.Fatalf("waits %v: the gate must wait for a host without elicitation", waits)
	}
	_ = g.Decide(t.Context(), id, true, "alice", "")
	res := <-done
	if res == nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "approved by alice") {
		t.Fatalf("after the decision: %+v", res)
	}
}

// A URL-mode host, with Config.ApprovalURL, is sent to the console's page
// of the approval; on its retry the gate waits for the decision made
// there.
func TestHostApprovalURL(t *testing.T) {
	g := newHeldGate()
	url := heldServer(t, g, func(c *Config) { c.ApprovalURL = "https://pool.example/ui/approvals/" })
	body, hdr := held26(`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}`, "", "")
	a := send(t, http.DefaultClient, url, body, hdr...)
	ir := inputRequired(t, a)
	var req struct {
		Method string `json:"method"`
		Params struct {
			Mode, URL, Message, ElicitationID string
		} `json:"params"`
	}
	if err := json.Unmarshal(ir.InputRequests[approvalInput], &req); err != nil {
		t.Fatal(err)
	}
	if req.Method != "elicitation/create" || req.Params.Mode != "url" || !regexp.MustCompile(`^https://pool\.example/ui/approvals/ap-[0-9a-f]{20}$`).MatchString(req.Params.URL) ||
		req.Params.ElicitationID != strings.TrimPrefix(req.Params.URL, "https://pool.example/ui/approvals/") {
		t.Fatalf("url elicitation %+v", req)
	}
	// The user accepted to open the page; an operator approves there.
	go func() {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			if _, waits := g.snapshot(); len(waits) == 2 {
				_ = g.Decide(context.Background(), req.Params.ElicitationID, true, "alice", "")
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	body, hdr = held26(`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}`, ir.RequestState, `{"toolpool_approval":{"action":"accept"}}`)
	a = send(t, http.DefaultClient, url, body, hdr...)
	if a.status != http.StatusOK || !strings.Contains(a.body, `ran held {\"path\":\"/srv/x\"} approved by alice`) {
		t.Fatalf("retry: %v", a)
	}
	if _, waits := g.snapshot(); len(waits) != 2 || waits[0] || !waits[1] {
		t.Errorf("waits %v: the first round asks, the accepted retry waits", waits)
	}
}

// held26 is a raw 2026-07-28 tools/call of held with the _meta entry
// caps, and on a retry the requestState and inputResponses; and its
// headers.
func held26(caps, state, responses string) (string, []string) {
	extra := ""
	if state != "" {
		extra = `,"requestState":"` + state + `","inputResponses":` + responses
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"held","arguments":{"path":"/srv/x"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},` + caps + `}` + extra + `}}`
	return body, []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "held", "Authorization", "Bearer " + heldKey}
}

type inputRequiredAnswer struct {
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	RequestState  string                     `json:"requestState"`
}

// inputRequired reads an input_required answer (SSE or JSON).
func inputRequired(t *testing.T, a answer) inputRequiredAnswer {
	t.Helper()
	body := a.body
	if i := strings.Index(body, "data: "); i >= 0 {
		body = strings.TrimSpace(body[i+len("data: "):])
	}
	var msg struct {
		Result inputRequiredAnswer `json:"result"`
	}
	if a.status != http.StatusOK || json.Unmarshal([]byte(body), &msg) != nil || msg.Result.ResultType != "input_required" || msg.Result.RequestState == "" {
		t.Fatalf("want input_required: %v", a)
	}
	return msg.Result
}

// The requestState is the server's: tampered, of another call's
// arguments, or presented with another key, it is refused (-32602) and
// nothing is decided.
func TestHostApprovalStateIsChecked(t *testing.T) {
	g := newHeldGate()
	ks, err := apikey.Parse(nil, []byte(`[{tenant: acme, name: ci-bot, key: `+heldKey+`}, {tenant: acme, name: other, key: other-0123456789abcdef}]`), "keys")
	if err != nil {
		t.Fatal(err)
	}
	_, url := serve(t, Config{Dispatcher: g, Tools: staticTools, Keys: ks, HostApprovals: g})
	const caps = `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}`
	body, hdr := held26(caps, "", "")
	ir := inputRequired(t, send(t, http.DefaultClient, url, body, hdr...))
	yes := `{"toolpool_approval":{"action":"accept","content":{"approve":true}}}`
	payload, mac, _ := strings.Cut(ir.RequestState, ".")
	for what, try := range map[string]struct{ body, key string }{
		"a forged signature": {mustHeld26(caps, payload+"."+strings.Repeat("A", len(mac)), yes), heldKey},
		"not a state":        {mustHeld26(caps, "garbage", yes), heldKey},
		"other arguments":    {strings.Replace(mustHeld26(caps, ir.RequestState, yes), `"/srv/x"`, `"/srv/y"`, 1), heldKey},
		"another API key":    {mustHeld26(caps, ir.RequestState, yes), "other-0123456789abcdef"},
	} {
		h := append(hdr[:len(hdr)-1:len(hdr)-1], "Bearer "+try.key)
		a := send(t, http.DefaultClient, url, try.body, h...)
		if !strings.Contains(a.body, "-32602") || !strings.Contains(a.body, "requestState") {
			t.Errorf("%s: %v, want -32602 about the requestState", what, a)
		}
	}
	if decided, _ := g.snapshot(); len(decided) != 0 {
		t.Fatalf("decided on a bad state: %q", decided)
	}
	// The genuine retry decides; the same retry sent again finds the
	// decision made and runs the call again under the same approval.
	for range 2 {
		a := send(t, http.DefaultClient, url, mustHeld26(caps, ir.RequestState, yes), hdr...)
		if !strings.Contains(a.body, `ran held {\"path\":\"/srv/x\"} approved by ci-bot via raw`) {
			t.Fatalf("genuine retry: %v", a)
		}
	}
	if decided, _ := g.snapshot(); len(decided) != 1 {
		t.Errorf("decisions %q", decided)
	}
	// An accept without a yes or no asks again, under the same approval.
	body, _ = held26(caps, "", "")
	ir = inputRequired(t, send(t, http.DefaultClient, url, body, hdr...))
	again := inputRequired(t, send(t, http.DefaultClient, url, mustHeld26(caps, ir.RequestState, `{"toolpool_approval":{"action":"accept","content":{}}}`), hdr...))
	if stateID(t, again.RequestState) != stateID(t, ir.RequestState) {
		t.Errorf("asked again under another approval")
	}
}

func mustHeld26(caps, state, responses string) string {
	body, _ := held26(caps, state, responses)
	return body
}

// stateID is the approval a requestState names.
func stateID(t *testing.T, state string) string {
	t.Helper()
	payload, _, _ := strings.Cut(state, ".")
	var st approvalState
	data, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil || st.ID == "" {
		t.Fatalf("state %q: %v", state, err)
	}
	return st.ID
}

// Without HostApprovals no host is asked, whatever it declares.
func TestNoHostApprovalsWaits(t *testing.T) {
	g := newHeldGate()
	url := heldServer(t, g, func(c *Config) { c.HostApprovals = nil })
	body, hdr := held26(`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}`, "", "")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	if _, waits := g.snapshot(); len(waits) != 1 || !waits[0] {
		t.Errorf("waits %v, want the gate to wait", waits)
	}
}

func TestApprovalURLChecked(t *testing.T) {
	for _, u := range []string{"pool.example/ui/approvals", "ftp://pool.example/x", "https://pool.example/ui?x=1", "https:///ui"} {
		if _, err := New(Config{Dispatcher: newHeldGate(), Tools: staticTools, ApprovalURL: u}); err == nil || !strings.Contains(err.Error(), "Config.ApprovalURL") {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// withBearer adds a token to every request.
type withBearer struct {
	token string
	next  http.RoundTripper
}

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// The input_required answer of a first round is the same on the fast
// path as on the go-sdk's (but for the approval and its signed state,
// new for each call).
func TestInputRequiredFastAsTheSDK(t *testing.T) {
	g := newHeldGate()
	ks, err := apikey.Parse(nil, []byte(`[{tenant: acme, name: ci-bot, key: `+heldKey+`}]`), "keys")
	if err != nil {
		t.Fatal(err)
	}
	s, url := serve(t, Config{Dispatcher: g, Tools: staticTools, Keys: ks, HostApprovals: g})
	body, hdr := held26(`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}`, "", "")
	fast := send(t, http.DefaultClient, url, body, hdr...)
	if s.fast.Load() != 1 {
		t.Fatalf("not on the fast path: %v", fast)
	}
	sdk := send(t, http.DefaultClient, url, strings.Replace(body, `"name":"held",`, `"name":"held","x":1,`, 1), hdr...)
	if s.fast.Load() != 1 {
		t.Fatal("the go-sdk's call went on the fast path")
	}
	norm := func(a answer) answer {
		a.body = regexp.MustCompile(`ap-[0-9a-f]{20}`).ReplaceAllString(a.body, "ap-X")
		a.body = regexp.MustCompile(`"requestState":"[^"]*"`).ReplaceAllString(a.body, `"requestState":"X"`)
		return a
	}
	inputRequired(t, fast)
	if norm(fast) != norm(sdk) {
		t.Errorf("\nfast   %v\ngo-sdk %v", fast, sdk)
	}
	if !strings.Contains(fast.body, `"io.modelcontextprotocol/serverInfo"`) || !strings.Contains(fast.body, `"mode":"form"`) ||
		!strings.Contains(fast.body, `"required":["approve"]`) {
		t.Errorf("answer %v", fast)
	}
}

// Over stdio, a 2026-07-28 host that declares elicitation is asked too:
// the round trip needs no HTTP.
func TestStdioHostDecidesApproval(t *testing.T) {
	g := newHeldGate()
	c := newStdioClient(t, Config{Dispatcher: g, Tools: staticTools, HostApprovals: g})
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"cli","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	a := c.call("tools/call", `{"name":"held","arguments":{"n":1},`+meta+`}`)
	var ir inputRequiredAnswer
	if a.Error != nil || json.Unmarshal(a.Result, &ir) != nil || ir.ResultType != "input_required" || ir.RequestState == "" {
		t.Fatalf("first round: %s %+v", a.Result, a.Error)
	}
	a = c.call("tools/call", `{"name":"held","arguments":{"n":1},`+meta+`,"requestState":"`+ir.RequestState+`",`+
		`"inputResponses":{"toolpool_approval":{"action":"accept","content":{"approve":true}}}}`)
	if a.Error != nil || !strings.Contains(string(a.Result), `ran held {\"n\":1} approved by an MCP host via cli`) {
		t.Fatalf("retry: %s %+v", a.Result, a.Error)
	}
}
