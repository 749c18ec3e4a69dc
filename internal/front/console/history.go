package console

import (
	"context"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/backlog"
	"github.com/toolpool/toolpool/internal/infra/subject"
)

// Backlog is the fleet's backlog and history as the console uses them
// (package backlog's *Monitor): the states on the overview, the charts.
type Backlog interface {
	// Backlog returns every tool's backlog now, judged.
	Backlog(ctx context.Context) ([]backlog.ToolBacklog, error)
	// Range returns the history's samples from since on, oldest first.
	Range(ctx context.Context, since time.Time) ([]backlog.Sample, error)
	// BacklogAge is the age of the oldest queued call past which a tool
	// is backing up.
	BacklogAge() time.Duration
}

// chartsWindow is how far back the charts go.
const chartsWindow = time.Hour

// chartSet is the charts of the pool (Tool "") or of one tool.
type chartSet struct {
	Tool    string
	Charts  []chart
	Samples int    // slots with a sample
	Err     string // why there are none
	Off     bool   // the console has no history (Config.Backlog is nil)
}

// charts reads the last hour of history and draws it for tool ("": the
// pool).
func (c *Console) charts(ctx context.Context, tool string, now time.Time) chartSet {
	set := chartSet{Tool: tool}
	if c.cfg.Backlog == nil {
		set.Off = true
		return set
	}
	step := backlog.SampleEvery
	end := now.Truncate(step) // the slot under way has no sample yet
	start := end.Add(-chartsWindow)
	samples, err := c.cfg.Backlog.Range(ctx, start)
	if err != nil {
		set.Err = err.Error()
	}
	n := int(chartsWindow / step)
	pts := make([]*backlog.ToolSample, n)
	for i := range samples {
		s := &samples[i]
		k := int(s.At.Sub(start) / step)
		if k < 0 || k >= n {
			continue
		}
		if ts := sampleOf(s, tool); ts != nil {
			pts[k] = ts
			set.Samples++
		}
	}
	set.Charts = drawCharts(pts, tool, start, step, c.cfg.Backlog.BacklogAge())
	return set
}

// sampleOf is tool's part of s (the pool's for ""), nil when s left it
// out. A tool missing from a sample that left none out was idle: zeros.
func sampleOf(s *backlog.Sample, tool string) *backlog.ToolSample {
	if tool == "" {
		return &s.Pool
	}
	i := sort.Search(len(s.Tools), func(i int) bool { return s.Tools[i].Tool >= tool })
	if i < len(s.Tools) && s.Tools[i].Tool == tool {
		return &s.Tools[i]
	}
	if s.Truncated > 0 {
		return nil
	}
	return &backlog.ToolSample{Tool: tool, State: backlog.StateOK}
}

// drawCharts makes the charts of pts, a sample per slot (nil: none).
func drawCharts(pts []*backlog.ToolSample, tool string, start time.Time, step, threshold time.Duration) []chart {
	id := "pool"
	if tool != "" {
		id = "tool"
	}
	line := func(name, class string, f func(*backlog.ToolSample) float64) series {
		s := series{Name: name, Class: class, Values: make([]float64, len(pts))}
		for i, p := range pts {
			if p == nil {
				s.Values[i] = math.NaN()
			} else {
				s.Values[i] = f(p)
			}
		}
		return s
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	classes := map[string]bool{}
	for _, p := range pts {
		if p != nil {
			for class := range p.ErrorsPerSec {
				classes[class] = true
			}
		}
	}
	var errs []series
	for _, class := range slices.Sorted(maps.Keys(classes)) {
		errs = append(errs, line(class, "s-"+classCSS(class), func(p *backlog.ToolSample) float64 { return p.ErrorsPerSec[class] }))
	}
	if len(errs) == 0 {
		errs = []series{line("errors", "s-internal", func(*backlog.ToolSample) float64 { return 0 })}
	}
	base := chart{Start: start, Step: step}
	mk := func(suffix, title, unit string, ss ...series) chart {
		c := base
		c.ID, c.Title, c.Unit, c.Series = id+"-"+suffix, title, unit, ss
		return c
	}
	oldest := mk("oldest", "Oldest queued call's age", "s",
		line("oldest queued", "s-oldest", func(p *backlog.ToolSample) float64 { return p.OldestAge.Seconds() }))
	oldest.Mark, oldest.MarkAs = threshold.Seconds(), "backing up past "+compactDuration(threshold)
	return []chart{
		mk("calls", "Calls per second", "/s", line("calls/s", "s-calls", func(p *backlog.ToolSample) float64 { return p.CallsPerSec })),
		mk("errors", "Errors per second by class", "/s", errs...),
		mk("exec", "Execution time", "ms",
			line("p50", "s-p50", func(p *backlog.ToolSample) float64 { return ms(p.P50) }),
			line("p99", "s-p99", func(p *backlog.ToolSample) float64 { return ms(p.P99) })),
		mk("queue", "Queued, running and waiting calls", "",
			line("queued", "s-queued", func(p *backlog.ToolSample) float64 { return float64(p.Queued) }),
			line("running", "s-running", func(p *backlog.ToolSample) float64 { return float64(p.Running) }),
			line("waiting", "s-waiting", func(p *backlog.ToolSample) float64 { return float64(p.Waiting) })),
		oldest,
	}
}

// classCSS is an error class as a CSS class: the known ones, else "other".
func classCSS(class string) string {
	switch class {
	case "transient", "permanent", "validation", "internal":
		return class
	}
	return "other"
}

// chartsFragment serves the charts alone, for the pages' slow poll:
// ?tool= names a tool, none the pool.
func (c *Console) chartsFragment(w http.ResponseWriter, r *http.Request, _ *session) {
	tool := r.URL.Query().Get("tool")
	if tool != "" && !subject.ValidToken(tool) {
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), overviewReadTimeout)
	defer cancel()
	c.renderTemplate(w, "overview", "charts", c.charts(ctx, tool, time.Now()))
}

// backlogOf is the backlog of each tool by name, and the error reading
// it; nil without Config.Backlog.
func (c *Console) backlogOf(ctx context.Context) (map[string]backlog.ToolBacklog, error) {
	if c.cfg.Backlog == nil {
		return nil, nil
	}
	tools, err := c.cfg.Backlog.Backlog(ctx)
	out := make(map[string]backlog.ToolBacklog, len(tools))
	for _, t := range tools {
		out[t.Tool] = t
	}
	return out, err
}

// The monitor satisfies the console's interface as it is.
var _ Backlog = (*backlog.Monitor)(nil)
