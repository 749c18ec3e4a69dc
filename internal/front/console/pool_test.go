package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/internal/front/console"
	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltest"
	"github.com/toolpool/toolpool/pkg/envelope"
)

var callN atomic.Int64

// call dispatches one call through the pool.
func call(t *testing.T, p *pooltest.Pool, tool, input string) envelope.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := fmt.Sprintf("toolu_console_%d", callN.Add(1))
	res, err := p.D.Dispatch(ctx, "s", []envelope.ToolUseBlock{{Type: "tool_use", ID: id, Name: tool, Input: json.RawMessage(input)}})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// jobState is a job's progress as the page reads it.
type jobState struct {
	State    string `json:"state"`
	Total    int    `json:"total"`
	Replayed int    `json:"replayed"`
	Deleted  int    `json:"deleted"`
	Error    string `json:"error"`
	Calls    []struct {
		Seq     uint64 `json:"seq"`
		Outcome string `json:"outcome"`
		Detail  string `json:"detail"`
	} `json:"calls"`
}

var seqRow = regexp.MustCompile(`<tr data-seq="(\d+)">`)

// Through a real pool, on an open (loopback) console: a flaky dead letter
// is listed with its code, its page shows the model's last words, the tool
// page groups its failures by code, a replay job republishes it and
// reports the replayed call's own result, and a purge of all matching
// empties the tool's dead letters.
func TestDeadLettersThroughAPool(t *testing.T) {
	t.Parallel()
	p := pooltest.Start(t)
	c, err := console.New(console.Config{Conn: p.NC, JetStream: p.JS, Loopback: true, IdleAfter: time.Minute, Logger: natstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	b := &bundle{srv: newServer(t, c)}
	cl := client(t)
	_, page := b.get(t, cl, "/ui/")
	csrf := csrfMeta.FindStringSubmatch(page)[1]
	self := b.srv.URL

	// The console watches results from its first request on.
	natstest.Eventually(t, time.Minute, "the tail to show an echo result", func() bool {
		call(t, p, "echo", `{"text":"hi"}`)
		_, body := b.get(t, cl, "/ui/tail.json?tool=echo")
		return strings.Contains(body, `"tool":"echo"`)
	})
	if res := call(t, p, "flaky", `{"fail":"503","times":10}`); !res.IsError {
		t.Fatalf("flaky answered %+v", res)
	}
	_, list := b.get(t, cl, "/ui/dlq?tool=flaky&code=http_503")
	m := seqRow.FindStringSubmatch(list)
	if m == nil {
		t.Fatalf("flaky's dead letter is not listed:\n%s", list)
	}
	seq := m[1]
	if _, entry := b.get(t, cl, "/ui/dlq/"+seq); !strings.Contains(entry, "dead-lettered") || !strings.Contains(entry, "http_503") {
		t.Errorf("the entry page lacks the model's last words or the code:\n%s", entry)
	}
	natstest.Eventually(t, time.Minute, "the tool page to group flaky's failures by code", func() bool {
		_, tool := b.get(t, cl, "/ui/tools/flaky")
		return strings.Contains(tool, "<td>http_503</td>") && strings.Contains(tool, "dead-lettered")
	})
	if _, ov := b.get(t, cl, "/ui/overview.frag"); !strings.Contains(ov, `<tr data-tool="flaky">`) || !strings.Contains(ov, "transient") {
		t.Errorf("the overview lacks flaky's errors:\n%s", ov)
	}

	job := func(path string, form url.Values) jobState {
		t.Helper()
		form.Set("csrf", csrf)
		req, _ := http.NewRequest(http.MethodPost, self+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", self)
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var started struct{ Job, Error string }
		_ = json.NewDecoder(resp.Body).Decode(&started)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, started.Error)
		}
		var st jobState
		natstest.Eventually(t, time.Minute, "the job to end", func() bool {
			_, body := b.get(t, cl, "/ui/jobs/"+started.Job)
			st = jobState{}
			_ = json.Unmarshal([]byte(body), &st)
			return st.State == "done" || st.State == "failed"
		})
		return st
	}
	st := job("/ui/dlq/replay", url.Values{"seq": {seq}, "rate": {"0"}, "wait": {"30s"}})
	if st.State != "done" || st.Replayed != 1 || len(st.Calls) != 1 || st.Calls[0].Outcome != "is_error" || !strings.Contains(st.Calls[0].Detail, "http_503") {
		t.Errorf("replay job: %+v; want one call replayed whose result is flaky's is_error", st)
	}
	s, err := dlq.NewStore(context.Background(), p.JS)
	if err != nil {
		t.Fatal(err)
	}
	// The replayed call fails again into a dead letter of its own; "all
	// matching" up to the listing's last sequence purges it.
	var upto string
	natstest.Eventually(t, time.Minute, "the replayed call's own dead letter", func() bool {
		_, list := b.get(t, cl, "/ui/dlq?tool=flaky")
		m := regexp.MustCompile(`name="upto" value="(\d+)"`).FindStringSubmatch(list)
		upto = m[1]
		return seqRow.MatchString(list)
	})
	st = job("/ui/dlq/purge", url.Values{"all": {"1"}, "tool": {"flaky"}, "upto": {upto}, "confirm": {"purge"}})
	if n, err := s.Counts(context.Background()); err != nil || n["flaky"] != 0 || st.Deleted != 1 {
		t.Errorf("after purging all of flaky's: %v dead letters (%v), job %+v", n, err, st)
	}
}
