package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/backlog"
	"github.com/toolpool/toolpool/internal/front/console"
)

// fakeBacklog is a backlog monitor with fixed answers.
type fakeBacklog struct {
	mu      sync.Mutex
	tools   []backlog.ToolBacklog
	samples []backlog.Sample
	since   time.Time
}

func (f *fakeBacklog) Backlog(context.Context) ([]backlog.ToolBacklog, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tools, nil
}

func (f *fakeBacklog) Range(_ context.Context, since time.Time) ([]backlog.Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.since = since
	var out []backlog.Sample
	for _, s := range f.samples {
		if !s.At.Before(since) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (f *fakeBacklog) BacklogAge() time.Duration { return 30 * time.Second }

func (f *fakeBacklog) set(tools ...backlog.ToolBacklog) {
	f.mu.Lock()
	f.tools = tools
	f.mu.Unlock()
}

var healthBadge = regexp.MustCompile(`<span class="badge (\w+)" id="pool-health">([^<]*)</span>`)

// The overview's health is green only while no tool backs up or stalls:
// amber with a tool backing up, red with one stalled, each named with its
// reason; the table shows each tool's state, oldest queued call and drain
// estimate.
func TestOverviewBacklogStates(t *testing.T) {
	t.Parallel()
	fb := &fakeBacklog{}
	b := setup(t, func(c *console.Config) { c.Backlog = fb; c.Refresh = time.Nanosecond })
	c, _ := b.loggedIn(t)
	ok := backlog.ToolBacklog{Tool: "echo", State: backlog.StateOK, Draining: true}
	slow := backlog.ToolBacklog{Tool: "slow", Queued: 10, Running: 2, OldestAge: 45 * time.Second, State: backlog.StateBackingUp,
		Reason: "its oldest queued call waited 45s, over 30s", Draining: true, Drain: 90 * time.Second}
	stuck := backlog.ToolBacklog{Tool: "stuck", Queued: 3, OldestAge: 2 * time.Minute, State: backlog.StateStalled,
		Reason: "no live worker serves stuck"}
	for _, tc := range []struct {
		name  string
		tools []backlog.ToolBacklog
		class string
		badge string
	}{
		{"all ok", []backlog.ToolBacklog{ok}, "good", "pool ready"},
		{"one backing up", []backlog.ToolBacklog{ok, slow}, "warn", "pool ready: 1 tool backing up"},
		{"one stalled", []backlog.ToolBacklog{ok, slow, stuck}, "bad", "pool ready: 2 tools stalled"},
	} {
		fb.set(tc.tools...)
		_, page := b.get(t, c, "/ui/overview.frag")
		m := healthBadge.FindStringSubmatch(page)
		if m == nil || m[1] != tc.class || m[2] != tc.badge {
			t.Errorf("%s: health badge %q, want class %q and %q\n%s", tc.name, m, tc.class, tc.badge, page)
		}
	}
	_, page := b.get(t, c, "/ui/overview.frag")
	for _, want := range []string{
		`<span class="alarm state-stalled" data-tool="stuck"><a href="/ui/tools/stuck">stuck</a> stalled: no live worker serves stuck</span>`,
		`<span class="alarm state-backing_up" data-tool="slow"><a href="/ui/tools/slow">slow</a> backing up: its oldest queued call waited 45s, over 30s</span>`,
		`<td class="backlog state-backing_up" title="its oldest queued call waited 45s, over 30s">backing up</td><td class="n oldest">45s</td>`,
		`<td class="n drain">1m30s</td>`,
		`<td class="n drain">not draining</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the overview lacks %s\n%s", want, page)
		}
	}
	if strings.Index(page, `data-tool="stuck"`) > strings.Index(page, `data-tool="slow"`) {
		t.Error("the stalled tool is not named first")
	}
	_, tool := b.get(t, c, "/ui/tools/slow/frag")
	if !strings.Contains(tool, `id="backlog-state">backing up: its oldest queued call waited 45s, over 30s</td>`) ||
		!strings.Contains(tool, "about 1m30s") {
		t.Errorf("slow's page lacks its backlog:\n%s", tool)
	}
}

// slotSample is a sample of the pool and of echo in the slot at.
func slotSample(at time.Time, calls float64, queued uint64, oldest time.Duration) backlog.Sample {
	ts := backlog.ToolSample{Tool: "echo", CallsPerSec: calls, ErrorsPerSec: map[string]float64{"transient": calls / 10},
		P50: 2 * time.Millisecond, P99: 9 * time.Millisecond, Queued: queued, Running: 2, Waiting: 1, OldestAge: oldest, State: backlog.StateOK}
	pool := ts
	pool.Tool = ""
	return backlog.Sample{At: at, Pool: pool, Tools: []backlog.ToolSample{ts}}
}

var polyline = regexp.MustCompile(`<polyline class="line ([\w-]+)" points="([^"]+)"/>`)

// The charts draw the last hour of the history on the server as SVG: one
// chart per measure, a line per series, a gap where no sample was written,
// the backing-up threshold dashed, titled for screen readers, with no
// inline style or script (the console's CSP forbids them); per tool on
// the tool page, for the pool on the overview.
func TestChartsOfTheLastHour(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(backlog.SampleEvery)
	fb := &fakeBacklog{}
	// 30 slots of samples, a gap of 5 slots, then 10 more; one before the
	// hour, not drawn.
	fb.samples = append(fb.samples, slotSample(now.Add(-2*time.Hour), 99, 0, 0))
	for i := 45; i > 0; i-- {
		if i > 10 && i <= 15 {
			continue
		}
		fb.samples = append(fb.samples, slotSample(now.Add(-time.Duration(i)*backlog.SampleEvery), float64(i), uint64(i), time.Duration(i)*time.Second))
	}
	b := setup(t, func(c *console.Config) { c.Backlog = fb })
	c, _ := b.loggedIn(t)
	resp, page := b.get(t, c, "/ui/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("overview: %d", resp.StatusCode)
	}
	if got := resp.Header.Get("Content-Security-Policy"); !strings.Contains(got, "default-src 'self'") {
		t.Errorf("CSP %q", got)
	}
	if strings.Contains(page, "style=") || strings.Count(page, "<script") != 1 {
		t.Errorf("the page has inline style or script")
	}
	for _, id := range []string{"pool-calls", "pool-errors", "pool-exec", "pool-queue", "pool-oldest"} {
		if !strings.Contains(page, `<svg class="chart" id="`+id+`" viewBox="0 0 480 150" role="img" aria-labelledby="`+id+`-t"><title id="`+id+`-t">`) {
			t.Errorf("the overview lacks chart %s", id)
		}
	}
	if !strings.Contains(page, `<title id="pool-oldest-t">Oldest queued call&#39;s age over the last hour</title>`) {
		t.Error("the oldest-age chart has no title")
	}
	lines := polyline.FindAllStringSubmatch(page, -1)
	perClass := map[string]int{}
	for _, l := range lines {
		perClass[l[1]]++
	}
	// Every series is two polylines: before and after the gap.
	for _, cls := range []string{"s-calls", "s-transient", "s-p50", "s-p99", "s-queued", "s-running", "s-waiting", "s-oldest"} {
		if perClass[cls] != 2 {
			t.Errorf("series %s: %d polylines, want 2 (a gap between)", cls, perClass[cls])
		}
	}
	if !strings.Contains(page, `<line class="mark"`) || !strings.Contains(page, "<title>backing up past 30s</title>") {
		t.Error("the oldest-age chart lacks the threshold")
	}
	// The legend's last value: the newest sample's.
	if !strings.Contains(page, `calls/s <span class="last">1/s</span>`) || !strings.Contains(page, `oldest queued <span class="last">1s</span>`) {
		t.Errorf("the legends lack the last values")
	}
	// The x axis ends now, an hour after it starts; the slot under way is
	// not asked for.
	if !strings.Contains(page, `>−1h0m</text>`) || !strings.Contains(page, `>now</text>`) {
		t.Error("the x axis lacks its labels")
	}
	fb.mu.Lock()
	since := fb.since
	fb.mu.Unlock()
	if !since.Equal(now.Add(-time.Hour)) {
		t.Errorf("Range asked from %v, want %v", since, now.Add(-time.Hour))
	}

	_, tool := b.get(t, c, "/ui/tools/echo")
	if !strings.Contains(tool, `id="tool-calls"`) || !strings.Contains(tool, `data-poll="/ui/charts.frag?tool=echo" data-every="10000"`) {
		t.Error("the tool page lacks its charts, polled every 10 s")
	}
	if !strings.Contains(tool, `queued <span class="last">1</span>`) || strings.Count(tool, `<polyline class="line s-queued"`) != 2 {
		t.Errorf("the tool page's queue chart does not draw echo's samples")
	}
	_, frag := b.get(t, c, "/ui/charts.frag?tool=idle")
	if !strings.Contains(frag, `id="tool-calls"`) || strings.Contains(frag, "charts-empty") {
		t.Errorf("a tool absent from complete samples is drawn as idle (zeros), not as no history:\n%s", frag)
	}
	if resp, _ := b.get(t, c, "/ui/charts.frag?tool=a.b"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("charts of a bad tool name: %d, want 404", resp.StatusCode)
	}

	// Without history: a note, not empty charts.
	fb.mu.Lock()
	fb.samples = nil
	fb.mu.Unlock()
	if _, frag := b.get(t, c, "/ui/charts.frag"); !strings.Contains(frag, `id="charts-empty"`) || strings.Contains(frag, "<polyline") {
		t.Errorf("with no history:\n%s", frag)
	}
}

// Without a backlog monitor the overview has no backlog columns and no
// charts, and stays green while the pool is ready.
func TestOverviewWithoutBacklog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, _ := b.loggedIn(t)
	_, page := b.get(t, c, "/ui/")
	if strings.Contains(page, "<svg") || strings.Contains(page, "oldest queued") || !strings.Contains(page, `<span class="badge good" id="pool-health">`) {
		t.Errorf("without a backlog monitor:\n%s", page)
	}
}
