package console

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// tailLimit is the most results one poll of the tail answers.
const tailLimit = 200

func (c *Console) tailPage(w http.ResponseWriter, r *http.Request, ss *session) {
	c.render(w, "tail", newView(ss, "Live calls", "tail", nil))
}

// tailEntry is one result in the tail's JSON.
type tailEntry struct {
	N        uint64  `json:"n"`
	At       string  `json:"at"`
	Tool     string  `json:"tool"`
	Tenant   string  `json:"tenant"`
	Class    string  `json:"class"`
	Code     string  `json:"code,omitempty"`
	Worker   string  `json:"worker,omitempty"`
	ExecMS   float64 `json:"exec_ms"`
	Attempts int     `json:"attempts,omitempty"`
	Key      string  `json:"key,omitempty"` // the call's page is /ui/calls/{key}
	CallID   string  `json:"call_id,omitempty"`
	Trace    string  `json:"trace,omitempty"` // the trace's URL (Config.TraceURL)
}

// tailJSON answers the results after ?after=N that pass the filters
// (tool, tenant, class: "ok", "errors" or a class), oldest first.
func (c *Console) tailJSON(w http.ResponseWriter, r *http.Request, _ *session) {
	q := r.URL.Query()
	after, _ := strconv.ParseUint(q.Get("after"), 10, 64)
	tool, tenant, class := q.Get("tool"), q.Get("tenant"), q.Get("class")
	rows, last := c.watch.tailAfter(after, tailLimit, func(rr *resultRow) bool {
		switch {
		case tool != "" && !strings.Contains(rr.Tool, tool):
			return false
		case tenant != "" && rr.Tenant != tenant:
			return false
		case class == "errors":
			return rr.Class != "ok"
		case class != "" && rr.Class != class:
			return false
		}
		return true
	})
	out := make([]tailEntry, len(rows))
	for i, rr := range rows {
		out[i] = tailEntry{N: rr.N, At: rr.At.UTC().Format(time.TimeOnly + ".000"), Tool: rr.Tool, Tenant: rr.Tenant,
			Class: rr.Class, Code: rr.Code, Worker: rr.Worker, ExecMS: float64(rr.Exec.Microseconds()) / 1000, Attempts: rr.Attempts,
			Key: rr.Key, CallID: rr.CallID, Trace: c.traceLink(rr.Trace)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"last": last, "results": out})
}
