package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/orchestrator/approval"
)

// Bounds of the Approvals page.
const (
	pendingShown = 200      // pending approvals listed (deadline soonest first)
	decidedShown = 100      // decided approvals listed below the pending ones
	inputShown   = 64 << 10 // bytes of an input shown (pretty-printed)
	reasonMax    = 1000     // characters of a decision's reason
)

// approvalRow is one approval as the page shows it, through an
// allow-list of its record's fields.
type approvalRow struct {
	ID, Tool, Tenant, Session, CallID, KeyName, Binding string
	Input                                               string // pretty-printed, cut at inputShown
	Created, Deadline, DecidedAt                        time.Time
	State                                               string
	Pending                                             bool
	DecidedBy, Reason, Via                              string
	// UsedAt is when the approved call was let through (zero before);
	// Previous the earlier approvals of a call held again, each spent by
	// a run.
	UsedAt   time.Time
	Previous []approval.PreviousApproval
}

func approvalRowOf(r *approval.Record) approvalRow {
	return approvalRow{
		ID: r.ID, Tool: r.Tool, Tenant: r.Tenant, Session: r.Session, CallID: r.CallID, KeyName: r.KeyName,
		Binding: r.Binding, Input: prettyInput(r.Input), Created: r.CreatedAt, Deadline: r.Deadline(),
		DecidedAt: r.DecidedAt, State: string(r.State), Pending: r.State == approval.StatePending,
		DecidedBy: r.DecidedBy, Reason: r.Reason, Via: r.Via, UsedAt: r.UsedAt, Previous: r.Previous,
	}
}

// prettyInput is an input indented when it is JSON, as text otherwise,
// cut at inputShown bytes.
func prettyInput(raw []byte) string {
	var b bytes.Buffer
	s := string(raw)
	if json.Indent(&b, raw, "", "  ") == nil {
		s = string(unescapeHTML(b.Bytes()))
	}
	if len(s) > inputShown {
		cut := inputShown
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "\n… (" + strconv.Itoa(len(s)-cut) + " more bytes)"
	}
	return strings.ToValidUTF8(s, "�")
}

// unescapeHTML turns the escapes \u003c, \u003e and \u0026 of JSON
// strings back into <, > and & (Go's encoder writes them so; the page
// escapes for HTML itself), so that an approver reads the input as the
// agent sent it. Other escapes are kept.
func unescapeHTML(js []byte) []byte {
	if !bytes.Contains(js, []byte(`\u00`)) {
		return js
	}
	out := make([]byte, 0, len(js))
	for i := 0; i < len(js); i++ {
		if js[i] != '\\' || i+1 == len(js) {
			out = append(out, js[i])
			continue
		}
		if js[i+1] == 'u' && i+6 <= len(js) {
			switch string(js[i+2 : i+6]) {
			case "003c", "003C":
				out, i = append(out, '<'), i+5
				continue
			case "003e", "003E":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
		}
		out, i = append(out, js[i], js[i+1]), i+1 // an escape pair, kept
	}
	return out
}

// approvalsView is the Approvals page's data: the list, or one approval
// (One).
type approvalsView struct {
	Off     bool // no approval store: the page says how to get one
	Err     string
	Msg     string // what the last decision did
	Pending []approvalRow
	Decided []approvalRow
	More    int // decided approvals not listed
	// MorePending are the pending approvals not listed: the page shows
	// those timing out first.
	MorePending int
	One         *approvalRow
}

// approvalCard is what the "card" template gets: one pending or decided
// approval with the page's CSRF token and where a decision returns to.
type approvalCard struct {
	approvalRow
	CSRF, Back string
}

func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request, ss *session) {
	v := &approvalsView{}
	if c.cfg.Approvals == nil {
		v.Off = true
		c.render(w, "approvals", newView(ss, "Approvals", "approvals", v))
		return
	}
	recs, err := c.cfg.Approvals.List(r.Context(), true)
	if err != nil {
		c.log.Warn("console: listing approvals failed", "operator", ss.operator, "err", err)
		v.Err = "The approvals cannot be read: " + err.Error()
	}
	for i := range recs {
		row := approvalRowOf(&recs[i])
		switch {
		case row.Pending && len(v.Pending) < pendingShown:
			v.Pending = append(v.Pending, row)
		case row.Pending:
			v.MorePending++
		case len(v.Decided) < decidedShown:
			v.Decided = append(v.Decided, row)
		default:
			v.More++
		}
	}
	if id := r.URL.Query().Get("decided"); approval.ValidID(id) {
		for _, row := range v.Decided {
			if row.ID == id {
				v.Msg = "Approval " + id + " (" + row.Tool + ") " + row.State + "."
			}
		}
	}
	c.render(w, "approvals", newView(ss, "Approvals", "approvals", v))
}

// approvalRoute answers 404 for an {id} that is not an approval's id,
// before h sees it.
func approvalRoute(h func(http.ResponseWriter, *http.Request, *session)) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, ss *session) {
		if !approval.ValidID(r.PathValue("id")) {
			http.NotFound(w, r)
			return
		}
		h(w, r, ss)
	}
}

func (c *Console) approvalPage(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	if c.cfg.Approvals == nil {
		c.render(w, "approvals", newView(ss, "Approvals", "approvals", &approvalsView{Off: true}))
		return
	}
	rec, err := c.cfg.Approvals.Get(r.Context(), id)
	if errors.Is(err, approval.ErrNotFound) {
		c.fail(w, ss, http.StatusNotFound, "There is no approval "+id+" (or its record has expired).")
		return
	}
	if err != nil {
		c.fail(w, ss, http.StatusBadGateway, "Approval "+id+" cannot be read: "+err.Error())
		return
	}
	row := approvalRowOf(&rec)
	c.render(w, "approvals", newView(ss, "Approval "+id, "approvals", &approvalsView{One: &row}))
}

// decide approves or denies an approval: the operator is "by", the
// console "via". A decision is logged with the operator, as every action.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, ss *session) {
	id := r.PathValue("id")
	if c.cfg.Approvals == nil {
		c.fail(w, ss, http.StatusNotFound, "Approvals are not enabled on this orchestrator.")
		return
	}
	var approve bool
	switch d := r.PostFormValue("decision"); d {
	case "approve":
		approve = true
	case "deny":
	default:
		c.fail(w, ss, http.StatusBadRequest, "decision: want approve or deny, got "+quoteShort(d))
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if !utf8.ValidString(reason) || strings.ContainsFunc(reason, isControl) {
		c.fail(w, ss, http.StatusBadRequest, "reason: must be text on one line")
		return
	}
	if n := utf8.RuneCountInString(reason); n > reasonMax {
		c.fail(w, ss, http.StatusBadRequest, "reason: at most "+strconv.Itoa(reasonMax)+" characters, got "+strconv.Itoa(n))
		return
	}
	decision := "denied"
	if approve {
		decision = "approved"
	}
	rec, err := c.cfg.Approvals.Decide(r.Context(), id, approve, ss.operator, reason, approval.ViaConsole)
	if err != nil {
		c.log.Warn("console: approval decision refused", "operator", ss.operator, "approval", id, "decision", decision, "err", err)
		status := http.StatusBadGateway
		switch {
		case errors.Is(err, approval.ErrNotFound):
			status = http.StatusNotFound
		case errors.Is(err, approval.ErrAlreadyDecided), errors.Is(err, approval.ErrTimedOut):
			status = http.StatusConflict
		case errors.Is(err, approval.ErrInvalid):
			status = http.StatusBadRequest
		}
		c.fail(w, ss, status, "The decision was not recorded: "+err.Error())
		return
	}
	c.log.Info("console: approval decided", "operator", ss.operator, "approval", id, "tool", rec.Tool,
		"tenant", rec.Tenant, "decision", decision, "reason", reason)
	if r.PostFormValue("back") == "one" {
		http.Redirect(w, r, Path+"approvals/"+id, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Path+"approvals?"+url.Values{"decided": {id}}.Encode(), http.StatusSeeOther)
}

// timeLeft is the time until t, "due" once passed.
func timeLeft(t time.Time) string {
	d := time.Until(t)
	if d <= 0 {
		return "due"
	}
	return ops.Age(d)
}

// isControl reports a control character (a reason is one line of text).
func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// quoteShort quotes s, cut to 40 characters.
func quoteShort(s string) string {
	if utf8.RuneCountInString(s) > 40 {
		s = string([]rune(s)[:40]) + "…"
	}
	return strconv.Quote(s)
}
