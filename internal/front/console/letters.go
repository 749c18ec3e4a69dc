package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// filterForm is the dead-letter filter of a request's query or form.
type filterForm struct {
	Tool, Reason, Code, Tenant, Text, Age, CallID string
}

func readFilterForm(v url.Values) filterForm {
	g := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	return filterForm{Tool: g("tool"), Reason: g("reason"), Code: g("code"), Tenant: g("tenant"), Text: g("q"), Age: g("age"), CallID: g("call")}
}

// callIDMax is the longest call id a search takes.
const callIDMax = 256

// filter is f as a dlq.Filter; an error names the bad field.
func (f filterForm) filter(now time.Time) (dlq.Filter, error) {
	reason, err := classify.ParseDeadLetterReason(f.Reason)
	if err != nil {
		return dlq.Filter{}, errors.New("reason: want one of " + classify.DeadLetterReasonList())
	}
	out := dlq.Filter{Tool: f.Tool, Reason: reason, Code: f.Code, Tenant: f.Tenant, Text: f.Text, CallID: f.CallID}
	if f.Tool != "" && jetstream.CheckToken("tool", f.Tool) != nil {
		return out, errors.New("tool: not a tool name")
	}
	if len(f.CallID) > callIDMax || !utf8.ValidString(f.CallID) || strings.ContainsFunc(f.CallID, unicode.IsControl) {
		return out, fmt.Errorf("call: a call id (or its start) is text of at most %d bytes", callIDMax)
	}
	if f.Age != "" {
		d, err := time.ParseDuration(f.Age)
		if err != nil || d <= 0 {
			return out, errors.New("age: want a duration such as 30m or 2h")
		}
		out.Since = now.Add(-d)
	}
	return out, nil
}

// query is f as a query string (for links to the next page).
func (f filterForm) query() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"tool": f.Tool, "reason": f.Reason, "code": f.Code, "tenant": f.Tenant, "q": f.Text, "age": f.Age, "call": f.CallID} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// letterRow is one dead letter in the list, allow-listed.
type letterRow struct {
	Seq      uint64
	Stored   time.Time
	Tool     string
	Reason   string
	Code     string
	Tenant   string
	CallID   string
	Attempts int
	Error    string
}

func rowOf(l *dlq.Letter) letterRow {
	r := letterRow{Seq: l.Seq, Stored: l.Stored, Tool: l.Tool(), Reason: string(l.Reason()), Code: l.Code(), Tenant: l.Tenant(),
		CallID: shorten(l.CallID(), 64)}
	if l.Entry != nil {
		r.Attempts = l.Entry.AttemptCount()
		r.Error = ops.OneLine(l.Entry.Error, 160)
	} else if l.Err != nil {
		r.Error = "not an entry: " + l.Err.Error()
	}
	return r
}

// Orders of the dead-letter list.
const (
	orderNewest = "newest"
	orderOldest = "oldest"
)

// lettersView is the list page's data.
type lettersView struct {
	Filter  filterForm
	Order   string // orderNewest (the default) or orderOldest
	Grouped bool   // the group view: counts by error code
	Err     string
	Rows    []letterRow
	Groups  []codeGroup
	Counted int  // letters the group view counted
	Capped  bool // the group view counted the newest groupScanMax only
	More    bool
	Next    string // query of the next page
	First   string // query of the first page (when not on it)
	UpTo    uint64 // TOOL_DLQ's last sequence when listed: "all matching" stops there
	Counts  []toolCount
	Total   uint64
	Reasons []classify.Fate
	Elapsed time.Duration
}

// Link is the list's URL with the filter, the order and the view, changed
// by the key-value pairs given ("" removes a key).
func (v *lettersView) Link(kv ...string) string {
	q := v.Filter.query()
	if v.Order != orderNewest {
		q.Set("order", v.Order)
	}
	if v.Grouped {
		q.Set("view", "codes")
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			q.Del(kv[i])
		} else {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return Path + "dlq"
	}
	return Path + "dlq?" + q.Encode()
}

type toolCount struct {
	Tool string
	N    uint64
}

func (c *Console) lettersPage(w http.ResponseWriter, r *http.Request, ss *session) {
	start := time.Now()
	q := r.URL.Query()
	v := &lettersView{Filter: readFilterForm(q), Order: cmp.Or(q.Get("order"), orderNewest), Grouped: q.Get("view") == "codes",
		Reasons: classify.DeadLetterReasons()}
	s, err := c.dlqStore(r.Context())
	if err != nil {
		c.fail(w, ss, http.StatusBadGateway, "The dead letters cannot be read: "+err.Error())
		return
	}
	f, err := v.Filter.filter(start)
	if err == nil && v.Order != orderNewest && v.Order != orderOldest {
		v.Order, err = orderNewest, errors.New("order: want newest or oldest")
	}
	if err != nil {
		v.Err = err.Error()
		c.renderStatus(w, http.StatusBadRequest, "letters", newView(ss, "Dead letters", "dlq", v))
		return
	}
	counts, err := s.Counts(r.Context())
	if err == nil {
		for _, tool := range slices.Sorted(maps.Keys(counts)) {
			v.Counts = append(v.Counts, toolCount{tool, counts[tool]})
			v.Total += counts[tool]
		}
	}
	v.UpTo, _ = c.lastSeq(r.Context())
	f.UpTo = v.UpTo
	switch {
	case v.Grouped:
		err = c.listGroups(r.Context(), s, f, v)
	case v.Order == orderOldest:
		err = c.listOldest(r.Context(), s, f, q, v)
	default:
		err = c.listNewest(r.Context(), s, f, q, v)
	}
	if err != nil {
		v.Err = err.Error()
	}
	v.Elapsed = time.Since(start)
	c.render(w, "letters", newView(ss, "Dead letters", "dlq", v))
}

// listOldest lists a page oldest first, from ?after= on.
func (c *Console) listOldest(ctx context.Context, s *dlq.Store, f dlq.Filter, q url.Values, v *lettersView) error {
	if after, err := strconv.ParseUint(q.Get("after"), 10, 64); err == nil {
		f.After = after
		v.First = v.Link("after", "")
	}
	letters, more, err := s.Page(ctx, f, c.cfg.PageSize)
	for _, l := range letters {
		v.Rows = append(v.Rows, rowOf(l))
	}
	if v.More = more; more && len(letters) > 0 {
		v.Next = v.Link("after", strconv.FormatUint(letters[len(letters)-1].Seq, 10))
	}
	return err
}

// listNewest lists a page newest first, from ?before= back.
func (c *Console) listNewest(ctx context.Context, s *dlq.Store, f dlq.Filter, q url.Values, v *lettersView) error {
	hi := f.UpTo
	if before, err := strconv.ParseUint(q.Get("before"), 10, 64); err == nil && before > 0 {
		hi = min(hi, before-1)
		v.First = v.Link("before", "")
	}
	rng, ok, err := c.dlqRange(ctx, f, hi)
	if err != nil || !ok {
		return err
	}
	rows, more, err := newestFirst(ctx, s, f, rng, c.cfg.PageSize, rowOf)
	v.Rows = rows
	if v.More = more; more && len(rows) > 0 {
		v.Next = v.Link("before", strconv.FormatUint(rows[len(rows)-1].Seq, 10))
	}
	return err
}

// listGroups counts the newest matching letters (up to groupScanMax) by
// error code.
func (c *Console) listGroups(ctx context.Context, s *dlq.Store, f dlq.Filter, v *lettersView) error {
	rng, ok, err := c.dlqRange(ctx, f, f.UpTo)
	if err != nil || !ok {
		return err
	}
	keys, more, err := newestFirst(ctx, s, f, rng, groupScanMax, groupKeyOf)
	v.Counted, v.Capped = len(keys), more
	v.Groups = groupByCode(keys, func(code string) string { return v.Link("view", "", "code", code) })
	return err
}

// lastSeq is TOOL_DLQ's last sequence.
func (c *Console) lastSeq(ctx context.Context) (uint64, error) {
	st, err := c.cfg.JetStream.Stream(ctx, jetstream.StreamDLQ)
	if err != nil {
		return 0, err
	}
	return st.CachedInfo().State.LastSeq, nil
}

// letterView is one dead letter's page: an allow-list of its entry.
type letterView struct {
	Row       letterRow
	CallID    string
	Session   string
	Created   time.Time
	Input     []byte
	Raw       string // a call that does not decode, shown as text
	Attempts  []settle.Attempt
	Error     string
	First     time.Time
	Last      time.Time
	Deliver   int
	LastWords string // the is_error text the model read
	WordsNote string // why there are none
	Key       string // the call's key, for its page
	TraceID   string
	TraceURL  string
}

func (c *Console) letterPage(w http.ResponseWriter, r *http.Request, ss *session) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		c.fail(w, ss, http.StatusNotFound, "That is not a dead letter's sequence.")
		return
	}
	s, err := c.dlqStore(r.Context())
	if err != nil {
		c.fail(w, ss, http.StatusBadGateway, "The dead letters cannot be read: "+err.Error())
		return
	}
	l, err := s.Get(r.Context(), seq)
	if errors.Is(err, dlq.ErrNotFound) {
		c.fail(w, ss, http.StatusNotFound, "Dead letter "+strconv.FormatUint(seq, 10)+" is not in TOOL_DLQ: replayed or purged.")
		return
	}
	if err != nil {
		c.fail(w, ss, http.StatusBadGateway, err.Error())
		return
	}
	v := &letterView{Row: rowOf(l)}
	if e := l.Entry; e != nil {
		v.CallID, v.Attempts, v.Error, v.First, v.Last, v.Deliver = e.CallID, e.Attempts, e.Error, e.FirstFailure, e.LastFailure, e.Deliveries
		if call, err := envelope.DecodeCall(e.Call, envelope.DefaultLimits); err == nil {
			v.Session, v.Created, v.Input, v.Key = call.Session, call.CreatedAt, call.Input, call.Key
			v.TraceID, v.TraceURL = traceID(call.Traceparent), c.traceLink(call.Traceparent)
			v.LastWords, v.WordsNote = c.lastWords(r.Context(), call.Key)
		} else if len(e.RawCall) > 0 {
			v.Raw = shorten(strings.ToValidUTF8(string(e.RawCall), "�"), 4000)
			v.WordsNote = "The call did not decode; its caller was answered without it."
		}
	}
	c.render(w, "letter", newView(ss, "Dead letter "+strconv.FormatUint(seq, 10), "dlq", v))
}

// lastWords is the result the call's caller (the model) got, from
// TOOL_RESULTS while it keeps it.
func (c *Console) lastWords(ctx context.Context, key string) (string, string) {
	st, err := c.cfg.JetStream.Stream(ctx, jetstream.StreamResults)
	if err != nil {
		return "", "TOOL_RESULTS cannot be read: " + err.Error()
	}
	m, err := st.GetLastMsgForSubject(ctx, jetstream.ResultKeySubject(key))
	if errors.Is(err, js.ErrMsgNotFound) {
		return "", "TOOL_RESULTS no longer holds the result the model got (it keeps results for a while only)."
	}
	if err != nil {
		return "", "The result cannot be read: " + err.Error()
	}
	res, err := envelope.DecodeResult(m.Data)
	if err != nil {
		return "", "The stored result does not decode: " + err.Error()
	}
	return res.Content.Text(), ""
}

// selection is what a replay or purge acts on: the sequences given, or
// everything the filter matches up to the listing's last sequence.
type selection struct {
	Seqs   []uint64
	All    bool
	Filter dlq.Filter
	Desc   string
}

func readSelection(r *http.Request) (selection, error) {
	var sel selection
	if err := r.ParseForm(); err != nil {
		return sel, err
	}
	form := r.PostForm
	if form.Get("all") == "1" {
		ff := readFilterForm(form)
		f, err := ff.filter(time.Now())
		if err != nil {
			return sel, err
		}
		upto, err := strconv.ParseUint(form.Get("upto"), 10, 64)
		if err != nil || upto == 0 {
			return sel, errors.New("upto: the listing's last sequence is missing")
		}
		f.UpTo = upto
		sel.All, sel.Filter = true, f
		sel.Desc = "all matching " + ff.query().Encode() + " up to " + strconv.FormatUint(upto, 10)
		return sel, nil
	}
	for _, s := range form["seq"] {
		seq, err := strconv.ParseUint(s, 10, 64)
		if err != nil || seq == 0 {
			return sel, errors.New("seq: " + strconv.Quote(s) + " is not a dead letter's sequence")
		}
		sel.Seqs = append(sel.Seqs, seq)
	}
	if len(sel.Seqs) == 0 {
		return sel, errors.New("select dead letters first")
	}
	b, _ := json.Marshal(sel.Seqs)
	sel.Desc = "seqs " + string(b)
	return sel, nil
}
