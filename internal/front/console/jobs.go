package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nuid"

	"github.com/toolpool/toolpool/internal/fleet/dlq"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// Bounds of the replay jobs.
const (
	jobsKept          = 20                       // finished jobs a progress link still finds
	replayWaitDefault = dlq.ReplayTimeoutDefault // each replayed call's deadline, and the wait for the results after the last (as dlq replay --timeout)
	replayWaitMax     = 24 * time.Hour           // the longest it may be asked for
	callsShown        = 2000                     // per-call results a job keeps
)

// job is one replay or purge, run in the background; the page polls its
// progress (jobStatus).
type job struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Operator string    `json:"operator"`
	Started  time.Time `json:"started"`

	mu       sync.Mutex
	State    string    `json:"state"` // selecting, replaying, waiting for results, done, failed
	Total    int       `json:"total"`
	Done     int       `json:"done"`
	Replayed int       `json:"replayed"`
	Skipped  int       `json:"skipped"`
	Deleted  int       `json:"deleted"`
	OK       int       `json:"ok"`
	Failed   int       `json:"failed"`
	Err      string    `json:"error,omitempty"`
	Calls    []jobCall `json:"calls"`
	index    map[string]int
}

// jobCall is one dead letter's outcome in a job.
type jobCall struct {
	Seq     uint64 `json:"seq"`
	Tool    string `json:"tool"`
	NewID   string `json:"new_id,omitempty"`
	Outcome string `json:"outcome"` // replayed, skipped, failed, ok, is_error, no result
	Detail  string `json:"detail,omitempty"`
}

func (j *job) set(f func(*job)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	f(j)
}

// jobs are the jobs running and recently finished.
type jobs struct {
	mu      sync.Mutex
	byID    map[string]*job
	order   []string
	running sync.WaitGroup
}

func newJobs() *jobs { return &jobs{byID: map[string]*job{}} }

func (js *jobs) start(kind, operator string, run func(*job)) *job {
	j := &job{ID: nuid.Next(), Kind: kind, Operator: operator, Started: time.Now(), State: "selecting", Calls: []jobCall{}, index: map[string]int{}}
	js.mu.Lock()
	js.byID[j.ID] = j
	js.order = append(js.order, j.ID)
	if len(js.order) > jobsKept {
		delete(js.byID, js.order[0])
		js.order = js.order[1:]
	}
	js.running.Add(1)
	js.mu.Unlock()
	go func() {
		defer js.running.Done()
		run(j)
	}()
	return j
}

func (js *jobs) get(id string) *job {
	js.mu.Lock()
	defer js.mu.Unlock()
	return js.byID[id]
}

func (js *jobs) wait() { js.running.Wait() }

// seqsOf returns the sequences sel covers: the ones given, or those its
// filter selects (dlq.Store.Seqs, as dlq replay --all).
func seqsOf(ctx context.Context, s *dlq.Store, sel selection) ([]uint64, error) {
	if !sel.All {
		return sel.Seqs, nil
	}
	return s.Seqs(ctx, sel.Filter)
}

// replay starts a replay job: the dead letters republished through
// dlq.Store.Replay at the chosen rate, each one's result waited for with
// dlq.WatchReplayResults, as `orchestrator dlq replay --wait` does.
func (c *Console) replay(w http.ResponseWriter, r *http.Request, ss *session) {
	sel, err := readSelection(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	rate, err := dlq.ParseRate(r.PostFormValue("rate"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "rate: " + err.Error()})
		return
	}
	wait := replayWaitDefault
	if d, err := time.ParseDuration(r.PostFormValue("wait")); err == nil && d > 0 {
		wait = min(d, replayWaitMax)
	}
	s, err := c.dlqStore(r.Context())
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	j := c.jobs.start("replay", ss.operator, func(j *job) { c.runReplay(j, s, sel, rate, wait) })
	c.log.Info("console: replay started", "operator", ss.operator, "job", j.ID, "selection", sel.Desc, "rate", rate)
	writeJSON(w, http.StatusAccepted, map[string]string{"job": j.ID})
}

func (c *Console) runReplay(j *job, s *dlq.Store, sel selection, rate float64, wait time.Duration) {
	ctx := c.Life()
	fail := func(err error) {
		j.set(func(j *job) { j.State, j.Err = "failed", err.Error() })
		c.log.Warn("console: replay failed", "operator", j.Operator, "job", j.ID, "err", err)
	}
	seqs, err := seqsOf(ctx, s, sel)
	if err != nil {
		fail(err)
		return
	}
	cfg := dlq.ReplayConfig{Rate: rate, Timeout: wait, ReplyTo: "console-" + nuid.Next(), Tracer: c.cfg.Tracer}
	results, err := dlq.WatchReplayResults(ctx, c.cfg.JetStream, cfg.ReplyTo)
	if err != nil {
		fail(err)
		return
	}
	defer results.Stop()
	j.set(func(j *job) { j.State, j.Total = "replaying", len(seqs) })
	n, err := s.Replay(ctx, seqs, cfg, func(rp dlq.Replayed) {
		results.Expect(rp)
		j.set(func(j *job) {
			j.Done++
			call := jobCall{Seq: rp.Seq, Tool: rp.Tool, NewID: rp.NewID, Outcome: "replayed"}
			switch {
			case rp.Err != nil && (errors.Is(rp.Err, dlq.ErrNotFound) || errors.Is(rp.Err, dlq.ErrNotReplayable)):
				j.Skipped++
				call.Outcome, call.Detail = "skipped", rp.Err.Error()
			case rp.Err != nil:
				j.Failed++
				call.Outcome, call.Detail = "failed", rp.Err.Error()
			default:
				j.Replayed++
				if rp.Duplicate {
					call.Detail = "already republished by an earlier replay"
				}
			}
			if len(j.Calls) < callsShown {
				j.index[rp.NewID] = len(j.Calls)
				j.Calls = append(j.Calls, call)
			}
		})
	})
	c.log.Info("console: replayed dead letters", "operator", j.Operator, "job", j.ID, "replayed", n, "of", len(seqs), "err", err)
	if err != nil {
		fail(err)
		return
	}
	j.set(func(j *job) { j.State = "waiting for results" })
	results.Wait(ctx, wait, func(rp dlq.Replayed, res *envelope.Result) {
		j.set(func(j *job) {
			outcome, detail := "ok", ""
			switch {
			case res == nil:
				outcome, detail = "no result", "no result within "+wait.String()
				j.Failed++
			case res.IsError:
				outcome, detail = "is_error", shorten(string(res.Class)+" "+res.Code+": "+res.Content.Text(), 300)
				j.Failed++
			default:
				j.OK++
			}
			if i, ok := j.index[rp.NewID]; ok {
				j.Calls[i].Outcome, j.Calls[i].Detail = outcome, detail
			}
		})
	})
	j.set(func(j *job) { j.State = "done" })
	c.over.invalidate()
}

// purge starts a purge job, behind the typed confirmation: the form's
// confirm field must say "purge" (the page asks the operator to type it,
// with the number of letters it will delete in view).
func (c *Console) purge(w http.ResponseWriter, r *http.Request, ss *session) {
	sel, err := readSelection(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if r.PostFormValue("confirm") != "purge" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `type "purge" to confirm: purged dead letters are gone for good`})
		return
	}
	s, err := c.dlqStore(r.Context())
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	j := c.jobs.start("purge", ss.operator, func(j *job) {
		var n int
		var err error
		j.set(func(j *job) { j.State = "purging" })
		if sel.All {
			n, err = s.Purge(c.Life(), sel.Filter) // bounded by the listing's UpTo, as dlq purge --all
		} else {
			n, err = s.DeleteSeqs(c.Life(), sel.Seqs)
		}
		j.set(func(j *job) {
			j.Deleted, j.Done, j.Total, j.State = n, n, n, "done"
			if err != nil {
				j.State, j.Err = "failed", err.Error()
			}
		})
		c.log.Info("console: purged dead letters", "operator", j.Operator, "job", j.ID, "selection", sel.Desc, "deleted", n, "err", err)
		c.over.invalidate()
	})
	c.log.Info("console: purge started", "operator", ss.operator, "job", j.ID, "selection", sel.Desc)
	writeJSON(w, http.StatusAccepted, map[string]string{"job": j.ID})
}

// jobStatus answers a job's progress as JSON.
func (c *Console) jobStatus(w http.ResponseWriter, r *http.Request, _ *session) {
	j := c.jobs.get(r.PathValue("id"))
	if j == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such job (the console keeps the last 20)"})
		return
	}
	// Encoded under the job's lock, written after it: a slow poller must
	// not hold up the job (its results callback takes the lock).
	j.mu.Lock()
	data, err := json.Marshal(j)
	j.mu.Unlock()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSONBytes(w, http.StatusOK, data)
}
