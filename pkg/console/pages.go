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
)

//go:embed assets
var assets embed.FS

// pageNames are the pages, each assets/<name>.html on top of
// assets/layout.html.
var pageNames = []string{"login", "overview", "tool", "letters", "letter", "tail", "error"}

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
	"ago":  func(t time.Time) string { return age(time.Since(t)) },
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
}

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: templates: %w", err)
		}
		p.byName[name] = t
	}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	p.static = http.StripPrefix(Path+"static/", http.FileServerFS(static))
	return p, nil
}

// render writes page name in the layout.
func (c *Console) render(w http.ResponseWriter, name string, v *view) {
	c.renderTemplate(w, name, "layout.html", v)
}

// renderTemplate writes one template of page name (a fragment, or the
// whole page with "layout.html"), buffered, so that a failure is a 500.
func (c *Console) renderTemplate(w http.ResponseWriter, name, tmpl string, v any) {
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
	_, _ = w.Write(b.Bytes())
}

// newView is a page's view for session ss.
func newView(ss *session, title, nav string, data any) *view {
	return &view{Title: title, Nav: nav, Operator: ss.operator, CSRF: ss.csrf, Data: data}
}

// fail renders an error page.
func (c *Console) fail(w http.ResponseWriter, ss *session, status int, msg string) {
	w.WriteHeader(status)
	c.render(w, "error", newView(ss, "Error", "", msg))
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// age writes a duration as the dlq commands do: 45s, 12m, 3h, 5d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(max(d, 0)/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	default:
		return strconv.Itoa(int(d/(24*time.Hour))) + "d"
	}
}

// shortDuration rounds d to about three significant places; "-" for 0.
func shortDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

// oneLine keeps s on one line and at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
