package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/front/console"
	"github.com/toolpool/toolpool/internal/worker/settle"
	"github.com/toolpool/toolpool/jetstream"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// storeLetter stores a dead letter of tool whose last attempt failed with
// code, as a worker would, and returns its sequence.
func storeLetter(t *testing.T, j js.JetStream, tool, id, code string) uint64 {
	t.Helper()
	call := fmt.Sprintf(`{"v":1,"id":%q,"tool":%q,"input":{},"created_at":"2026-01-01T00:00:00Z","deadline":"2026-01-01T00:01:00Z"}`, id, tool)
	e := settle.NewEntry(classify.FateExhausted, tool, id, []byte(call))
	e.Error = "failed with " + code
	e.Attempts = []settle.Attempt{{N: 1, WorkerID: "w1", Class: envelope.ClassTransient, Code: code, Message: e.Error, Started: time.Now()}}
	e.FirstFailure, e.LastFailure = time.Now(), time.Now()
	m, err := e.Msg(jetstream.DLQSubject(tool), id)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := j.PublishMsg(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

var letterSeqs = regexp.MustCompile(`<tr data-seq="(\d+)">`)

// seqsOn returns the sequences a list page shows, in its order.
func seqsOn(page string) []uint64 {
	var out []uint64
	for _, m := range letterSeqs.FindAllStringSubmatch(page, -1) {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		out = append(out, n)
	}
	return out
}

var nextLink = regexp.MustCompile(`<a id="next" href="([^"]+)">`)

// pagesOf follows the list's "next" links from path and returns every
// page's sequences.
func pagesOf(t *testing.T, b *bundle, c *http.Client, path string) [][]uint64 {
	t.Helper()
	var pages [][]uint64
	for range 20 {
		resp, page := b.get(t, c, path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, page)
		}
		pages = append(pages, seqsOn(page))
		m := nextLink.FindStringSubmatch(page)
		if m == nil {
			return pages
		}
		path = html.UnescapeString(m[1])
	}
	t.Fatalf("more than 20 pages from %s", path)
	return nil
}

func reversed(s []uint64) []uint64 {
	s = slices.Clone(s)
	slices.Reverse(s)
	return s
}

// The dead letters list newest first by default, page back with "older",
// and list oldest first on request; each order pages through every letter
// the filter matches, exactly once.
func TestLettersNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *console.Config) { c.PageSize = 3 })
	var all, alpha []uint64
	for i := range 8 {
		tool := "alpha"
		if i%3 == 2 {
			tool = "beta"
		}
		seq := storeLetter(t, b.js, tool, fmt.Sprintf("toolu_order_%d", i), "http_503")
		all = append(all, seq)
		if tool == "alpha" {
			alpha = append(alpha, seq)
		}
	}
	c, _ := b.loggedIn(t)
	for _, tc := range []struct {
		path string
		want [][]uint64
	}{
		{"/ui/dlq", [][]uint64{reversed(all)[:3], reversed(all)[3:6], reversed(all)[6:]}},
		{"/ui/dlq?order=oldest", [][]uint64{all[:3], all[3:6], all[6:]}},
		{"/ui/dlq?tool=alpha", [][]uint64{reversed(alpha)[:3], reversed(alpha)[3:]}},
		{"/ui/dlq?tool=alpha&order=oldest", [][]uint64{alpha[:3], alpha[3:]}},
		{"/ui/dlq?tool=gamma", [][]uint64{nil}},
	} {
		if got := pagesOf(t, b, c, tc.path); !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%s: pages %v, want %v", tc.path, got, tc.want)
		}
	}
	// Letters stored after the first page was listed do not shift the
	// older pages: they page back from where the first page stopped.
	_, first := b.get(t, c, "/ui/dlq")
	next := html.UnescapeString(nextLink.FindStringSubmatch(first)[1])
	storeLetter(t, b.js, "alpha", "toolu_order_late", "http_503")
	if _, page := b.get(t, c, next); !slices.Equal(seqsOn(page), reversed(all)[3:6]) {
		t.Errorf("the second page after a new letter: %v, want %v", seqsOn(page), reversed(all)[3:6])
	}
	// Newer than: newest first within the window only.
	if _, page := b.get(t, c, "/ui/dlq?age=1h"); len(seqsOn(page)) != 3 || seqsOn(page)[0] != all[len(all)-1]+1 {
		t.Errorf("newer than 1h: %v, want the 3 newest", seqsOn(page))
	}
	if _, page := b.get(t, c, "/ui/dlq?age=1ns"); len(seqsOn(page)) != 0 {
		t.Errorf("newer than 1ns: %v, want none", seqsOn(page))
	}
}

// A call id finds its dead letter, exactly or by its start; the filter
// goes with the "replay all matching" form.
func TestLettersSearchByCallID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	one := storeLetter(t, b.js, "alpha", "toolu_01ABCDEF", "timeout")
	two := storeLetter(t, b.js, "beta", "toolu_01ABCXYZ", "http_503")
	storeLetter(t, b.js, "alpha", "toolu_02ABCDEF", "timeout")
	c, _ := b.loggedIn(t)
	for _, tc := range []struct {
		call string
		want []uint64
	}{
		{"toolu_01ABCDEF", []uint64{one}},
		{"toolu_01ABC", []uint64{two, one}},
		{"ABCDEF", nil}, // the start of an id, not any part of it
	} {
		resp, page := b.get(t, c, "/ui/dlq?call="+tc.call)
		if resp.StatusCode != http.StatusOK || !slices.Equal(seqsOn(page), tc.want) {
			t.Errorf("call=%s: %d, seqs %v, want %v", tc.call, resp.StatusCode, seqsOn(page), tc.want)
		}
		if !strings.Contains(page, `<input type="hidden" name="call" value="`+tc.call+`">`) {
			t.Errorf("call=%s: the selection form does not carry the call id", tc.call)
		}
	}
	if _, page := b.get(t, c, "/ui/dlq?call=toolu_01ABCDEF"); !strings.Contains(page, `<td class="callid">toolu_01ABCDEF</td>`) {
		t.Errorf("the list does not show the call id:\n%s", page)
	}
}

var groupRow = regexp.MustCompile(`<tr data-code="([^"]*)"><td>(?:<a href="([^"]+)">[^<]*</a>|\(none\))</td><td>([^<]*)</td><td class="n">(\d+)</td>\s*<td>([^<]*)</td>`)

// The group view counts the matching dead letters by the error code of
// their last attempt, the largest group first, each linking to its list.
func TestLettersGroupedByCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 5 {
		storeLetter(t, b.js, "alpha", fmt.Sprintf("toolu_g503_%d", i), "http_503")
	}
	storeLetter(t, b.js, "beta", "toolu_g503_b", "http_503")
	for i := range 2 {
		storeLetter(t, b.js, "beta", fmt.Sprintf("toolu_gto_%d", i), "timeout")
	}
	storeLetter(t, b.js, "alpha", "toolu_gnone", "")
	c, _ := b.loggedIn(t)
	_, page := b.get(t, c, "/ui/dlq?view=codes")
	rows := groupRow.FindAllStringSubmatch(page, -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[1]+"="+r[4]+" "+r[5])
	}
	want := []string{"http_503=6 alpha, beta", "timeout=2 beta", "=1 alpha"}
	if !slices.Equal(got, want) {
		t.Fatalf("groups %q, want %q\n%s", got, want, page)
	}
	if link := html.UnescapeString(rows[1][2]); link != "/ui/dlq?code=timeout" {
		t.Errorf("timeout's group links to %q", link)
	}
	if rows[0][3] != "transient" {
		t.Errorf("http_503's class %q, want transient", rows[0][3])
	}
	_, list := b.get(t, c, html.UnescapeString(rows[1][2]))
	if n := len(seqsOn(list)); n != 2 {
		t.Errorf("timeout's list shows %d letters, want 2", n)
	}
	// Filters apply to the groups.
	_, page = b.get(t, c, "/ui/dlq?view=codes&tool=beta")
	got = got[:0]
	for _, r := range groupRow.FindAllStringSubmatch(page, -1) {
		got = append(got, r[1]+"="+r[4])
	}
	if !slices.Equal(got, []string{"timeout=2", "http_503=1"}) {
		t.Errorf("beta's groups %q", got)
	}
}

// A bad order or call id is refused, naming the field, with the filter
// kept in the form.
func TestLettersBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, _ := b.loggedIn(t)
	for _, tc := range []struct{ query, field string }{
		{"order=sideways", "order:"},
		{"call=a%00b", "call:"},
		{"call=" + strings.Repeat("x", 300), "call:"},
		{"age=-1h", "age:"},
	} {
		resp, page := b.get(t, c, "/ui/dlq?tool=alpha&"+tc.query)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, `<p class="bad" id="letters-error">`+tc.field) {
			t.Errorf("%s: %d, want 400 naming %q\n%s", tc.query, resp.StatusCode, tc.field, page)
		}
		if !strings.Contains(page, `name="tool" value="alpha"`) {
			t.Errorf("%s: the form lost the tool filter", tc.query)
		}
	}
}
