package mcpfront

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Approvals asked of the host (docs/mcp.md, "Approvals"): a 2026-07-28
// tools/call whose _meta declares the elicitation capability is run with
// policy.WithoutApprovalWait. When the gate holds the call for approval,
// the answer is an input_required result (the revision's multi
// round-trip requests) with one elicitation/create: a form (approve yes
// or no, and a reason), or, with Config.ApprovalURL and a host that
// declares URL mode, the console's page of the approval. Its requestState
// is signed with the session key and binds the approval, the call's id
// and session, the tool, a digest of the arguments, the credential and an
// expiry. The host's retry carries the answer: the decision is recorded
// (HostApprovals.Decide) and the call is sent to the gate again, which
// runs it or answers it with the decision. Hosts without the capability,
// and older revisions, are not asked: the gate waits for a decision made
// elsewhere (CLI, console), as for the HTTP API.

// HostApprovals records the decisions hosts make on the approvals their
// calls wait for: the approval store's Decide with via "mcp". by names
// the API key (its name, else its tenant) and the host (its clientInfo
// name); reason is the host's ("" for none). A second decision on one
// approval is an error; the first stands.
type HostApprovals interface {
	Decide(ctx context.Context, id string, approve bool, by, reason string) error
}

// HostApprovalsFunc adapts a function to HostApprovals.
type HostApprovalsFunc func(ctx context.Context, id string, approve bool, by, reason string) error

// Decide calls f.
func (f HostApprovalsFunc) Decide(ctx context.Context, id string, approve bool, by, reason string) error {
	return f(ctx, id, approve, by, reason)
}

// approvalInput is the key of the one input request of an approval.
const approvalInput = "toolpool_approval"

// approvalStateTTL bounds how long a host may take to answer: a retry
// with an older requestState is refused (the approval itself may time out
// sooner; the gate says so then).
const approvalStateTTL = 24 * time.Hour

// Limits of what a host's answer records.
const (
	maxReasonBytes = 1000 // the approval store's limit
	maxByBytes     = 128
	maxShownInput  = 4000 // the arguments shown in a form's message
)

// hostCall is what a 2026-07-28 tools/call says of its host: the
// elicitation modes its clientCapabilities declare, its clientInfo name,
// the credential's user, and a retry's requestState and inputResponses.
type hostCall struct {
	form, url bool
	client    string
	user      string
	state     string
	responses mcp.InputResponseMap
}

// hostOf reads a 2026-07-28 request's _meta for hostCall; nil when the
// host declares no elicitation.
func hostOf(meta map[string]any, user string) *hostCall {
	caps, _ := meta[mcp.MetaKeyClientCapabilities].(map[string]any)
	el, ok := caps["elicitation"].(map[string]any)
	if !ok {
		return nil
	}
	h := &hostCall{user: user}
	_, h.form = el["form"]
	_, h.url = el["url"]
	if len(el) == 0 {
		h.form = true // an empty object is form mode (the revision's backwards compatibility)
	}
	if !h.form && !h.url {
		return nil
	}
	if ci, ok := meta[mcp.MetaKeyClientInfo].(map[string]any); ok {
		h.client, _ = ci["name"].(string)
	}
	return h
}

// hostRound is how a call asks its host: the mode, and on a retry the
// verified state and what the host answered.
type hostRound struct {
	mode     string         // "form" or "url"
	st       *approvalState // a retry's; nil on a first round
	answered bool           // the retry carries an answer: the host is not asked again
	wait     bool           // wait for the decision (a URL-mode retry the user accepted)
}

// approvalState is a requestState's payload.
type approvalState struct {
	ID      string `json:"a"` // the approval
	Call    string `json:"c"` // the pool call id the approval derives from
	Session string `json:"s"`
	Tool    string `json:"t"`
	Input   string `json:"i"` // hex SHA-256 of the compact arguments
	User    string `json:"u"` // the credential's user
	Key     string `json:"k"` // the API key's name
	Mode    string `json:"m"`
	Exp     int64  `json:"e"` // unix seconds
}

// hostRound is the round of c with its host, nil when the host is not
// asked (no HostApprovals, no elicitation mode it can use). A retry's
// requestState is verified (a bad one is a protocol error), its call id
// and session are c's again (the same approval), and a form's answer is
// recorded as the decision.
func (s *Server) hostRound(ctx context.Context, c *callIn, input json.RawMessage) (*hostRound, error) {
	h := c.host
	if h == nil || s.cfg.HostApprovals == nil {
		return nil, nil
	}
	r := &hostRound{mode: "form"}
	if h.url && s.cfg.ApprovalURL != "" {
		r.mode = "url"
	} else if !h.form {
		return nil, nil
	}
	if h.state == "" {
		return r, nil
	}
	st, err := s.openState(h.state, c, input)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestState: " + err.Error() + "; call the tool again without it"}
	}
	r.st, c.callID, c.session = st, st.Call, st.Session
	resp, ok := h.responses[approvalInput].(*mcp.ElicitResult)
	if !ok {
		return r, nil // no answer: ask again
	}
	if st.Mode == "url" {
		r.answered, r.wait = true, resp.Action == "accept"
		return r, nil
	}
	approve, reason, decided := formDecision(resp)
	r.answered = decided || resp.Action == "cancel"
	if decided {
		if err := s.cfg.HostApprovals.Decide(ctx, st.ID, approve, decider(c), reason); err != nil {
			// Decided already (the first decision stands), timed out, or the
			// store is unreachable: the gate answers with what is recorded.
			s.cfg.Logger.InfoContext(ctx, "an MCP host's approval decision was not recorded", "approval", st.ID, "err", err)
		}
	}
	return r, nil
}

// formDecision reads a form's answer: accept with approve true or false,
// or decline (a denial). decided is false for cancel and for an accept
// without a boolean approve.
func formDecision(r *mcp.ElicitResult) (approve bool, reason string, decided bool) {
	reason, _ = r.Content["reason"].(string)
	reason = clipText(strings.TrimSpace(reason), maxReasonBytes)
	switch r.Action {
	case "accept":
		approve, decided = r.Content["approve"].(bool)
		return approve, reason, decided
	case "decline":
		return false, reason, true
	}
	return false, "", false
}

// decider is who decided through c's host: the key's name (its tenant
// without one) and the host's clientInfo name.
func decider(c *callIn) string {
	who := "an MCP host"
	switch {
	case c.key != nil && c.key.Name != "":
		who = c.key.Name
	case c.key != nil:
		who = "tenant " + c.key.Tenant
	}
	if name := clipText(printable(c.host.client), 64); name != "" {
		who += " via " + name
	}
	return clipText(who, maxByBytes)
}

// askHost is the input_required result that asks c's host to decide on
// the approval the gate held c for, or nil: the host is not asked (no
// round, a retry it answered), or r is not a call held for approval.
func (s *Server) askHost(hr *hostRound, rep *policy.Report, r *envelope.Result, c *callIn, input json.RawMessage) *mcp.CallToolResult {
	if hr == nil || hr.answered || !r.IsError || r.Code != classify.CodeApprovalPending || len(rep.Approvals) == 0 || rep.Approvals[0] == "" {
		return nil
	}
	id := rep.Approvals[0]
	st := approvalState{ID: id, Call: c.callID, Session: c.session, Tool: c.name, Input: inputDigest(input),
		User: c.host.user, Key: keyName(c), Mode: hr.mode, Exp: time.Now().Add(approvalStateTTL).Unix()}
	var ask *mcp.ElicitParams
	if hr.mode == "url" {
		ask = &mcp.ElicitParams{Mode: "url", URL: strings.TrimRight(s.cfg.ApprovalURL, "/") + "/" + id, ElicitationID: id,
			Message: "toolpool: the call to " + c.name + " needs a person's approval (" + id + "). Open the page to see its arguments and approve or deny it there."}
	} else {
		ask = &mcp.ElicitParams{Mode: "form", Message: approvalMessage(c.name, id, input), RequestedSchema: approvalSchema}
	}
	out := inputRequiredResult
	out.InputRequests = mcp.InputRequestMap{approvalInput: ask}
	out.RequestState = s.sealState(st)
	return &out
}

// approvalMessage is a form's message: the tool, the approval, and the
// arguments, pretty-printed and clipped.
func approvalMessage(tool, id string, input json.RawMessage) string {
	var pretty bytes.Buffer
	if json.Indent(&pretty, input, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(input)
	}
	return "toolpool: the agent asks to run " + tool + " with these arguments:\n\n" + clipText(pretty.String(), maxShownInput) +
		"\n\nThe call needs a person's approval (" + id + "). Approve it?"
}

// approvalSchema is a form's requested schema: approve (required) and an
// optional reason.
var approvalSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"approve":{"type":"boolean","title":"Approve this call","description":"Yes runs the call once, with these arguments; no refuses it."},` +
	`"reason":{"type":"string","title":"Reason","description":"Optional: recorded with the decision, and told to the agent when you refuse.","maxLength":1000}},` +
	`"required":["approve"]}`)

// inputRequiredResult is a CallToolResult with resultType
// "input_required": the go-sdk sets it only on the results of its own
// tool handlers, and has no exported way to set it.
var inputRequiredResult = func() mcp.CallToolResult {
	var r mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"resultType":"input_required"}`), &r); err != nil {
		panic(err) // a constant
	}
	r.Content = nil // as the go-sdk writes it
	return r
}()

// sealState is st as a requestState: its JSON, base64url, a dot and its
// HMAC-SHA256 under the session key.
func (s *Server) sealState(st approvalState) string {
	data, _ := json.Marshal(st)
	payload := base64.RawURLEncoding.EncodeToString(data)
	return payload + "." + s.stateMAC(payload)
}

func (s *Server) stateMAC(payload string) string {
	m := hmac.New(sha256.New, *s.key.Load())
	m.Write([]byte("toolpool mcp approval\x00"))
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// openState verifies a requestState for the call c with input: signed by
// this fleet, not expired, of the same credential, key, tool and
// arguments.
func (s *Server) openState(state string, c *callIn, input json.RawMessage) (*approvalState, error) {
	payload, mac, ok := strings.Cut(state, ".")
	if !ok || len(state) > 4096 || !hmac.Equal([]byte(mac), []byte(s.stateMAC(payload))) {
		return nil, errors.New("not one this server issued")
	}
	data, err := base64.RawURLEncoding.DecodeString(payload)
	var st approvalState
	if err != nil || json.Unmarshal(data, &st) != nil {
		return nil, errors.New("not one this server issued")
	}
	switch {
	case time.Now().Unix() > st.Exp:
		return nil, errors.New("expired")
	case st.User != c.host.user || st.Key != keyName(c):
		return nil, errors.New("issued to another credential")
	case st.Tool != c.name || st.Input != inputDigest(input):
		return nil, errors.New("issued for another call: the retry must send the same tool and arguments")
	}
	return &st, nil
}

// inputDigest is the hex SHA-256 of input without insignificant
// whitespace.
func inputDigest(input json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, input) != nil {
		b.Reset()
		b.Write(input)
	}
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:16])
}

// keyName is the name of c's API key, "" for none.
func keyName(c *callIn) string {
	if c.key == nil {
		return ""
	}
	return c.key.Name
}

// clipText is s cut to at most n bytes, on a rune boundary, with "…".
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// printable is s without control characters.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}
