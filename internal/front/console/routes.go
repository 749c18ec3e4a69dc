package console

import (
	"net/http"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/ops"
	"github.com/toolpool/toolpool/internal/infra/subject"
)

// routes are the console's pages and endpoints, all under Path.
func (c *Console) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", c.pages.static)
	mux.HandleFunc("GET /ui/login", c.login)
	mux.HandleFunc("POST /ui/login", c.login)
	mux.Handle("POST /ui/logout", c.authed(c.logout))
	mux.Handle("GET /ui/{$}", c.authed(c.overviewPage))
	mux.Handle("GET /ui/overview.frag", c.authed(c.overviewFragment))
	mux.Handle("GET /ui/charts.frag", c.authed(c.chartsFragment))
	mux.Handle("GET /ui/tools/{tool}", c.authed(toolRoute(c.toolPage)))
	mux.Handle("GET /ui/tools/{tool}/frag", c.authed(toolRoute(c.toolFragment)))
	mux.Handle("POST /ui/tools/{tool}/pause", c.authed(toolRoute(c.pause)))
	mux.Handle("POST /ui/tools/{tool}/resume", c.authed(toolRoute(c.resume)))
	mux.Handle("GET /ui/dlq", c.authed(c.lettersPage))
	mux.Handle("GET /ui/dlq/{seq}", c.authed(c.letterPage))
	mux.Handle("POST /ui/dlq/replay", c.authed(c.replay))
	mux.Handle("POST /ui/dlq/purge", c.authed(c.purge))
	mux.Handle("GET /ui/jobs/{id}", c.authed(c.jobStatus))
	mux.Handle("GET /ui/tail", c.authed(c.tailPage))
	mux.Handle("GET /ui/tail.json", c.authed(c.tailJSON))
	mux.Handle("GET /ui/calls/{key}", c.authed(c.callPage))
	mux.Handle("GET /ui/approvals", c.authed(c.approvalsPage))
	mux.Handle("GET /ui/approvals/{id}", c.authed(approvalRoute(c.approvalPage)))
	mux.Handle("POST /ui/approvals/{id}", c.authed(approvalRoute(c.decide)))
	mux.Handle("/ui/", c.authed(func(w http.ResponseWriter, r *http.Request, ss *session) {
		c.fail(w, ss, http.StatusNotFound, "There is no such page in the console.")
	}))
	return mux
}

// overviewPageView is the overview page's data: the state (polled each
// second) and the pool's charts (polled each SampleEvery).
type overviewPageView struct {
	Overview *overview
	Charts   chartSet
}

func (c *Console) overviewPage(w http.ResponseWriter, r *http.Request, ss *session) {
	v := overviewPageView{Overview: c.over.get(r.Context()), Charts: c.charts(r.Context(), "", time.Now())}
	c.render(w, "overview", newView(ss, "Overview", "overview", v))
}

func (c *Console) overviewFragment(w http.ResponseWriter, r *http.Request, ss *session) {
	c.renderTemplate(w, "overview", "table", c.over.get(r.Context()))
}

// toolView is the tool page's data.
type toolView struct {
	Row      toolRow
	Known    bool
	Failures []failureGroup
	Entry    *catalogEntry
	Charts   chartSet
}

// failureGroup is a tool's recent failures of one code: how many, the
// last one's time and worker, and the words the model read for it.
type failureGroup struct {
	Code, Class string
	N           int
	Last        resultRow
}

// byCode groups failures (newest first) by code, the most recent code
// first.
func byCode(failures []resultRow) []failureGroup {
	var out []failureGroup
	at := map[string]int{}
	for _, f := range failures {
		i, ok := at[f.Code]
		if !ok {
			i = len(out)
			at[f.Code] = i
			out = append(out, failureGroup{Code: f.Code, Class: f.Class, Last: f})
		}
		out[i].N++
	}
	return out
}

// toolRoute answers 404 for a {tool} that is not a tool name (a token:
// no '/', '.', spaces or wildcards), before h sees it: the name goes into
// the page's links, its polling URL and the subjects ops touches.
func toolRoute(h func(http.ResponseWriter, *http.Request, *session)) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, ss *session) {
		if !subject.ValidToken(r.PathValue("tool")) {
			http.NotFound(w, r)
			return
		}
		h(w, r, ss)
	}
}

func (c *Console) toolData(r *http.Request) *toolView {
	tool := r.PathValue("tool")
	ov := c.over.get(r.Context())
	row, ok := ov.tool(tool)
	if !ok {
		row.Tool = tool
	}
	return &toolView{Row: row, Known: ok, Failures: byCode(c.watch.failures(tool)), Entry: c.catalogEntry(r.Context(), tool)}
}

func (c *Console) toolPage(w http.ResponseWriter, r *http.Request, ss *session) {
	v := c.toolData(r)
	v.Charts = c.charts(r.Context(), v.Row.Tool, time.Now())
	c.render(w, "tool", newView(ss, r.PathValue("tool"), "tool", v))
}

func (c *Console) toolFragment(w http.ResponseWriter, r *http.Request, ss *session) {
	c.renderTemplate(w, "tool", "state", c.toolData(r))
}

// pause pauses a tool fleet-wide (its consumer), for the hours asked or
// until resumed.
func (c *Console) pause(w http.ResponseWriter, r *http.Request, ss *session) {
	tool := r.PathValue("tool")
	var until time.Time
	if d, err := time.ParseDuration(r.PostFormValue("for")); err == nil && d > 0 {
		until = time.Now().Add(d)
	}
	got, err := ops.PauseTool(r.Context(), c.cfg.JetStream, tool, until)
	if err != nil {
		c.log.Warn("console: pause failed", "operator", ss.operator, "tool", tool, "err", err)
		c.fail(w, ss, http.StatusBadGateway, "Pausing "+tool+" failed: "+err.Error())
		return
	}
	c.log.Info("console: tool paused fleet-wide", "operator", ss.operator, "tool", tool, "until", got.UTC().Format(time.RFC3339))
	c.over.invalidate()
	http.Redirect(w, r, Path+"tools/"+tool, http.StatusSeeOther)
}

func (c *Console) resume(w http.ResponseWriter, r *http.Request, ss *session) {
	tool := r.PathValue("tool")
	if err := ops.ResumeTool(r.Context(), c.cfg.JetStream, tool); err != nil {
		c.log.Warn("console: resume failed", "operator", ss.operator, "tool", tool, "err", err)
		c.fail(w, ss, http.StatusBadGateway, "Resuming "+tool+" failed: "+err.Error())
		return
	}
	c.log.Info("console: tool resumed fleet-wide", "operator", ss.operator, "tool", tool)
	c.over.invalidate()
	http.Redirect(w, r, Path+"tools/"+tool, http.StatusSeeOther)
}
