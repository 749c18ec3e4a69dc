package console

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

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
	Tool, Reason, Code, Tenant, Text, Age string
}

func readFilterForm(v url.Values) filterForm {
	g := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	return filterForm{Tool: g("tool"), Reason: g("reason"), Code: g("code"), Tenant: g("tenant"), Text: g("q"), Age: g("age")}
}

// filter is f as a dlq.Filter; an error names the bad field.
func (f filterForm) filter(now time.Time) (dlq.Filter, error) {
	reason, err := classify.ParseDeadLetterReason(f.Reason)
	if err != nil {
		return dlq.Filter{}, errors.New("reason: want one of " + classify.DeadLetterReasonList())
	}
	out := dlq.Filter{Tool: f.Tool, Reason: reason, Code: f.Code, Tenant: f.Tenant, Text: f.Text}
	if f.Tool != "" && jetstream.CheckToken("tool", f.Tool) != nil {
		return out, errors.New("tool: not a tool name")
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
	for k, s := range map[string]string{"tool": f.Tool, "reason": f.Reason, "code": f.Code, "tenant": f.Tenant, "q": f.Text, "age": f.Age} {
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
	Attempts int
	Error    string
}

func rowOf(l *dlq.Letter) letterRow {
	r := letterRow{Seq: l.Seq, Stored: l.Stored, Tool: l.Tool(), Reason: string(l.Reason()), Code: l.Code(), Tenant: l.Tenant()}
	if l.Entry != nil {
		r.Attempts = l.Entry.AttemptCount()
		r.Error = ops.OneLine(l.Entry.Error, 160)
	} else if l.Err != nil {
		r.Error = "not an entry: " + l.Err.Error()
	}
	return r
}

// lettersView is the list page's data.
type lettersView struct {
	Filter  filterForm
	Err     string
	Rows    []letterRow
	More    bool
	Next    string // query of the next page
	First   string // query of the first page (when not on it)
	UpTo    uint64 // TOOL_DLQ's last sequence when listed: "all matching" stops there
	Counts  []toolCount
	Total   uint64
	Reasons []classify.Fate
	Elapsed time.Duration
}

type toolCount struct {
	Tool string
	N    uint64
}

func (c *Console) lettersPage(w http.ResponseWriter, r *http.Request, ss *session) {
	start := time.Now()
	q := r.URL.Query()
	v := &lettersView{Filter: readFilterForm(q), Reasons: classify.DeadLetterReasons()}
	s, err := c.dlqStore(r.Context())
	if err != nil {
		c.fail(w, ss, http.StatusBadGateway, "The dead letters cannot be read: "+err.Error())
		return
	}
	f, err := v.Filter.filter(start)
	if err != nil {
		v.Err = err.Error()
		c.renderStatus(w, http.StatusBadRequest, "letters", newView(ss, "Dead letters", "dlq", v))
		return
	}
	if after, err := strconv.ParseUint(q.Get("after"), 10, 64); err == nil {
		f.After = after
		v.First = v.Filter.query().Encode()
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
	letters, more, err := s.Page(r.Context(), f, c.cfg.PageSize)
	if err != nil {
		v.Err = err.Error()
	}
	for _, l := range letters {
		v.Rows = append(v.Rows, rowOf(l))
	}
	if v.More = more; more && len(letters) > 0 {
		nq := v.Filter.query()
		nq.Set("after", strconv.FormatUint(letters[len(letters)-1].Seq, 10))
		v.Next = nq.Encode()
	}
	v.Elapsed = time.Since(start)
	c.render(w, "letters", newView(ss, "Dead letters", "dlq", v))
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
			v.Session, v.Created, v.Input = call.Session, call.CreatedAt, call.Input
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
