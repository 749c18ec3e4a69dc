package console

import (
	"io/fs"
	"net/http"
	"strings"
)

// staticFiles serves the console's script and style sheet from files by
// name, without a login (the login page needs them, and they hold nothing
// but the console's own code). It never lists a directory: a path that
// names a directory, or nothing, is a 404.
type staticFiles struct {
	fsys fs.FS
}

func (s staticFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, Path+"static/")
	if !ok || name == "" || !fs.ValidPath(name) {
		http.NotFound(w, r)
		return
	}
	info, err := fs.Stat(s.fsys, name)
	if err != nil || !info.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "max-age=300")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeFileFS(w, r, s.fsys, name)
}
