package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/toolpool/toolpool/internal/fleet/backlog"

	"github.com/toolpool/toolpool/internal/fleet/ops"
)

//go:embed assets
var assets embed.FS

// pageNames are the pages, each assets/<name>.html on top of
// assets/layout.html and the replay and purge dialog (assets/dialog.html).
var pageNames = []string{"login", "overview", "tool", "letters", "letter", "tail", "call", "approvals", "error"}

// pages are the parsed templates, one set per page.
type pages struct {
	byName map[string]*template.Template
	static http.Handler
}

// view is what every page gets.
type view struct {
	Title    string
	Nav      string
	Operator string
	CSRF     string
	Data     any
}

var funcs = template.FuncMap{
	"dur":  shortDuration,
	"ago":  func(t time.Time) string { return ops.Age(time.Since(t)) },
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"rate": func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"pretty": func(raw []byte) string {
		var b bytes.Buffer
		if json.Indent(&b, raw, "", "  ") != nil {
			return string(raw)
		}
		return b.String()
	},
	"deref":   func(t *time.Time) time.Time { return *t },
	"forever": func(t *time.Time) bool { return t != nil && time.Until(*t) > 365*24*time.Hour },
	"left":    timeLeft,
	"card":    func(r approvalRow, csrf, back string) approvalCard { return approvalCard{r, csrf, back} },
	"short":   compactDuration,
	"state":   func(s backlog.State) string { return strings.ReplaceAll(string(s), "_", " ") },
}

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/dialog.html", "assets/charts.html", "assets/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: templates: %w", err)
		}
		p.byName[name] = t
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	p.static = staticFiles{fsys: static}
	return p, nil
}

// render writes page name in the layout.
func (c *Console) render(w http.ResponseWriter, name string, v *view) {
	c.renderStatus(w, http.StatusOK, name, v)
}

// renderStatus writes page name in the layout with status: the page's
// headers (its Content-Security-Policy among them) go with any status.
func (c *Console) renderStatus(w http.ResponseWriter, status int, name string, v *view) {
	c.write(w, status, name, "layout.html", v)
}

// renderTemplate writes one template of page name (a fragment, or the
// whole page with "layout.html"), buffered, so that a failure is a 500.
func (c *Console) renderTemplate(w http.ResponseWriter, name, tmpl string, v any) {
	c.write(w, http.StatusOK, name, tmpl, v)
}

// write is renderTemplate with a status.
func (c *Console) write(w http.ResponseWriter, status int, name, tmpl string, v any) {
	var b bytes.Buffer
	if err := c.pages.byName[name].ExecuteTemplate(&b, tmpl, v); err != nil {
		c.log.Error("console: rendering failed", "page", name, "err", err)
		http.Error(w, "the console failed to render this page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// newView is a page's view for session ss.
func newView(ss *session, title, nav string, data any) *view {
	return &view{Title: title, Nav: nav, Operator: ss.operator, CSRF: ss.csrf, Data: data}
}

// fail renders an error page.
func (c *Console) fail(w http.ResponseWriter, ss *session, status int, msg string) {
	c.renderStatus(w, status, "error", newView(ss, "Error", "", msg))
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	writeJSONBytes(w, status, data)
}

// writeJSONBytes answers data, JSON already.
func writeJSONBytes(w http.ResponseWriter, status int, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}

// shortDuration is ops.ShortDuration, "-" for 0.
func shortDuration(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return ops.ShortDuration(d)
}
