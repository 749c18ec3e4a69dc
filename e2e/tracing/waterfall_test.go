package tracing_test

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"html/template"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolpool/toolpool/internal/infra/tracing"
)

// updateScreenshots asks for the screenshot in docs/observability/ (as
// TOOLPOOL_UPDATE_SCREENSHOTS=1 does); by default it goes to a temporary
// directory, so a test run leaves the checkout clean.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the trace screenshot to docs/observability/")

// chromiumPath is Debian's chromium package's binary (.ci/run installs it).
const chromiumPath = "/usr/bin/chromium"

// placeholderUI is what Jaeger serves instead of its UI when the binary
// was built without the UI's assets (as a build from the Go module proxy
// is: the assets are made by an npm build in Jaeger's own repository).
const placeholderUI = "This is not the Jaeger UI you are looking for"

// screenshotTrace makes docs/observability.md's picture of the trace with
// b: Jaeger's own trace page when its UI is in the binary, else the trace
// as the query API returned it, drawn as a waterfall by waterfallHTML.
func screenshotTrace(t *testing.T, b *browser, j *jaeger, tr *jTrace) {
	ctx := b.context(t)
	page := j.queryURL + "/trace/" + tr.TraceID
	if j.placeholderUI(t) {
		file := filepath.Join(t.TempDir(), "trace.html")
		if err := os.WriteFile(file, waterfallHTML(t, tr), 0o644); err != nil {
			t.Fatal(err)
		}
		page = "file://" + file
		t.Logf("Jaeger serves a placeholder for its UI: drawing the trace from the query API's JSON")
	}
	browseCtx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	if err := chromedp.Do(browseCtx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("body"))); err != nil {
		t.Fatalf("browser: open %s: %v", page, err)
	}
	png, err := chromedp.Run(browseCtx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: screenshot: %v", err)
	}
	dir := t.TempDir()
	if update, _ := strconv.ParseBool(os.Getenv("TOOLPOOL_UPDATE_SCREENSHOTS")); update || *updateScreenshots {
		dir = filepath.Join("..", "..", "docs", "observability")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "trace.png")
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", out)
}

// placeholderUI reports whether Jaeger's UI is the placeholder page.
func (j *jaeger) placeholderUI(t *testing.T) bool {
	t.Helper()
	resp, err := j.client.Get(j.queryURL + "/")
	if err != nil {
		t.Fatalf("Jaeger's UI: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("Jaeger's UI: %v", err)
	}
	return bytes.Contains(body, []byte(placeholderUI))
}

// browser is headless Chromium started by startBrowser.
type browser struct {
	missing string        // why there is no Chromium to start, or ""
	ready   chan struct{} // closed once the start ended; then ctx, err
	ctx     context.Context
	err     error
}

// startBrowser starts headless Chromium with a fresh profile, without
// waiting for it: its start (seconds of CPU on a busy machine) overlaps
// the test's own work until context is called. It is stopped when t ends.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	b := &browser{ready: make(chan struct{})}
	path, err := exec.LookPath(chromiumPath)
	if err != nil {
		b.missing = fmt.Sprintf("%s is missing", chromiumPath)
		close(b.ready)
		return b
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 600),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	go func() {
		defer close(b.ready)
		b.ctx, b.err = ctx, chromedp.Do(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		<-b.ready
	})
	return b
}

// context waits for the browser's start and returns its context. Without
// Chromium t is skipped, except in CI (CI=true); a failed start fails t.
func (b *browser) context(t *testing.T) context.Context {
	t.Helper()
	<-b.ready
	if b.missing != "" {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%s, and CI must make the trace screenshot: install Debian's chromium package (.ci/run does)", b.missing)
		}
		t.Skipf("%s: install Debian's chromium package (apt-get install chromium) to make the trace screenshot", b.missing)
	}
	if b.err != nil {
		t.Fatalf("start chromium: %v", b.err)
	}
	return b.ctx
}

// waterfallRow is one span of the drawing.
type waterfallRow struct {
	Indent      int // px
	Name        string
	Service     string
	Color       string
	Left, Width float64 // % of the trace's duration
	Duration    string
	Attrs       string
	Error       bool
	Events      []waterfallEvent
}

// waterfallEvent is a span event on its row.
type waterfallEvent struct {
	Left  float64 // % of the trace's duration
	Label string
}

// serviceColors colour the services' bars, in order of appearance.
var serviceColors = []string{"#3b7dd8", "#e08a1e", "#2a9d8f", "#8e5cc2"}

// shownAttrs are the attributes written next to a span, when it has them.
var shownAttrs = []string{
	string(tracing.Front), string(tracing.GenAIToolCallID), string(tracing.Attempt),
	string(tracing.WorkerID), string(tracing.QueueWait), string(tracing.ErrorType),
}

// waterfallHTML draws the trace as the query API returned it: one row per
// span, children under their parent in start order, the bars on a common
// time axis, events as marks on their span's bar.
func waterfallHTML(t *testing.T, tr *jTrace) []byte {
	t.Helper()
	start, end := tr.Spans[0].StartTime, int64(0)
	for _, s := range tr.Spans {
		start, end = min(start, s.StartTime), max(end, s.StartTime+s.Duration)
	}
	total := float64(max(end-start, 1))
	pct := func(us int64) float64 { return 100 * float64(us-start) / total }
	colors := map[string]string{}
	var rows []waterfallRow
	var add func(s *jSpan, depth int)
	add = func(s *jSpan, depth int) {
		svc := tr.service(s)
		if colors[svc] == "" {
			colors[svc] = serviceColors[len(colors)%len(serviceColors)]
		}
		var attrs []string
		for _, k := range shownAttrs {
			if v := s.tag(k); v != "" {
				attrs = append(attrs, k+"="+v)
			}
		}
		if id := kv(tr.Processes[s.ProcessID].Tags, "service.instance.id"); id != "" {
			attrs = append(attrs, "service.instance.id="+id)
		}
		row := waterfallRow{Indent: 16 * depth, Name: s.OperationName, Service: svc, Color: colors[svc],
			Left: pct(s.StartTime), Width: max(100*float64(s.Duration)/total, 0.3),
			Duration: (time.Duration(s.Duration) * time.Microsecond).Round(100 * time.Microsecond).String(),
			Attrs:    strings.Join(attrs, "  "), Error: s.tag("otel.status_code") == "ERROR"}
		for _, l := range s.Logs {
			label := kv(l.Fields, "event")
			for _, f := range l.Fields {
				if f.Key != "event" {
					label += fmt.Sprintf(" %s=%v", f.Key, f.Value)
				}
			}
			row.Events = append(row.Events, waterfallEvent{Left: pct(l.Timestamp), Label: label})
		}
		rows = append(rows, row)
		for _, c := range tr.children(s.SpanID) {
			add(c, depth+1)
		}
	}
	for _, root := range tr.children("") {
		add(root, 0)
	}
	type tick struct {
		Left  float64
		Label string
	}
	var ticks []tick
	for i := range 5 {
		at := time.Duration(float64(end-start)*float64(i)/4) * time.Microsecond
		ticks = append(ticks, tick{Left: float64(25 * i), Label: at.Round(time.Millisecond).String()})
	}
	var buf bytes.Buffer
	err := waterfallPage.Execute(&buf, map[string]any{
		"TraceID": tr.TraceID, "Spans": len(tr.Spans), "Rows": rows, "Ticks": ticks,
		"Duration": (time.Duration(end-start) * time.Microsecond).Round(time.Millisecond).String(),
		"Services": colors,
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// children are the spans whose parent is id (for "", the roots: spans
// with no parent in the trace), in start order.
func (tr *jTrace) children(id string) []*jSpan {
	in := map[string]bool{}
	for _, s := range tr.Spans {
		in[s.SpanID] = true
	}
	var out []*jSpan
	for i := range tr.Spans {
		s := &tr.Spans[i]
		p := s.parent()
		if p == id && id != "" || id == "" && !in[p] {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *jSpan) int { return cmp.Compare(a.StartTime, b.StartTime) })
	return out
}

var waterfallPage = template.Must(template.New("trace").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>trace {{.TraceID}}</title>
<style>
body { font: 13px/1.35 system-ui, sans-serif; margin: 16px 20px; color: #222; }
h1 { font-size: 17px; margin: 0 0 2px; } .sub { color: #666; margin-bottom: 10px; }
.legend span { display: inline-block; margin-right: 14px; } .legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; border-radius: 2px; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
td { border-top: 1px solid #eee; padding: 5px 6px; vertical-align: top; }
td.name { width: 330px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
td.name b { font-weight: 600; } td.name small { color: #666; margin-left: 4px; }
.track { position: relative; height: 16px; margin-top: 1px; }
.bar { position: absolute; height: 14px; border-radius: 2px; opacity: .85; }
.bar.err { outline: 2px solid #c62828; }
.ev { position: absolute; top: -2px; width: 2px; height: 18px; background: #111; }
.dur { font-size: 11px; color: #444; }
.axis { position: relative; height: 14px; font-size: 11px; color: #666; }
.axis span { position: absolute; transform: translateX(-50%); }
.axis span:first-child { transform: none; } .axis span:last-child { transform: translateX(-100%); }
.attrs { font: 11px/1.3 ui-monospace, monospace; color: #555; margin-top: 2px; white-space: pre-wrap; }
.evs { font: 11px/1.3 ui-monospace, monospace; color: #222; }
.err-text { color: #c62828; font-weight: 600; }
</style></head><body>
<h1>Trace {{.TraceID}}</h1>
<div class="sub">{{.Spans}} spans, {{.Duration}} — read from Jaeger's query API (<code>/api/traces</code>) and drawn by the test</div>
<div class="legend">{{range $svc, $color := .Services}}<span><i style="background: {{$color}}"></i>{{$svc}}</span>{{end}}</div>
<table>
<tr><td class="name"></td><td><div class="axis">{{range .Ticks}}<span style="left: {{printf "%.0f" .Left}}%">{{.Label}}</span>{{end}}</div></td></tr>
{{range .Rows}}<tr>
<td class="name" style="padding-left: {{.Indent}}px"><b>{{.Name}}</b><small>{{.Service}}</small>{{if .Error}} <span class="err-text">error</span>{{end}}</td>
<td><div class="track"><div class="bar{{if .Error}} err{{end}}" style="left: {{printf "%.3f" .Left}}%; width: {{printf "%.3f" .Width}}%; background: {{.Color}}"></div>{{range .Events}}<div class="ev" style="left: {{printf "%.3f" .Left}}%" title="{{.Label}}"></div>{{end}}</div>
<div class="dur">{{.Duration}}</div>{{if .Attrs}}<div class="attrs">{{.Attrs}}</div>{{end}}{{if .Events}}<div class="evs">events: {{range $i, $e := .Events}}{{if $i}}; {{end}}{{$e.Label}}{{end}}</div>{{end}}</td>
</tr>{{end}}
</table>
</body></html>
`))
