package docscheck

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Origin is the markdown line a line of a program came from; Line 0 for a
// line the checker added.
type Origin struct {
	File string
	Line int
}

// String is "file:line", or "(added by the checker)".
func (o Origin) String() string {
	if o.Line == 0 {
		return "(added by the checker)"
	}
	return o.File + ":" + strconv.Itoa(o.Line)
}

// Program is the source file one checked snippet is compiled as: the
// snippets it comes after, its prepended code, itself and, for TypeScript
// and JavaScript, an empty export that makes the file a module of its own
// (so that two snippets' top-level names do not clash, and top-level await
// works).
type Program struct {
	Snippet Snippet
	Name    string   // a file name for it: "<markdown base>_<line>.<ext>"
	Source  string   // the code
	Origins []Origin // Origins[i] is where line i+1 of Source came from
}

// Programs returns the program of each checked (not skipped) snippet of
// snippets, the snippets of one markdown file as Extract returns them.
func Programs(snippets []Snippet) []Program {
	named := map[string]Snippet{}
	var out []Program
	for _, s := range snippets {
		if s.Name != "" {
			named[s.Name] = s
		}
		if s.Skip != "" {
			continue
		}
		p := Program{Snippet: s, Name: programName(s)}
		var b strings.Builder
		add := func(code string, o Origin, advance bool) {
			for line := range strings.Lines(code) {
				b.WriteString(line)
				if !strings.HasSuffix(line, "\n") {
					b.WriteByte('\n')
				}
				p.Origins = append(p.Origins, o)
				if advance {
					o.Line++
				}
			}
		}
		var addSnippet func(s Snippet)
		addSnippet = func(s Snippet) {
			for _, a := range s.After {
				addSnippet(named[a])
			}
			for _, code := range s.Prepend {
				add(code, Origin{File: s.File, Line: s.Line - 1}, false)
			}
			add(s.Code, Origin{File: s.File, Line: s.Line}, true)
		}
		addSnippet(s)
		if s.Lang != Python {
			add("export {};\n", Origin{}, false)
		}
		p.Source = b.String()
		out = append(out, p)
	}
	return out
}

func programName(s Snippet) string {
	base := strings.TrimSuffix(filepath.Base(s.File), filepath.Ext(s.File))
	base = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, base)
	ext := map[Lang]string{TypeScript: ".ts", JavaScript: ".js", Python: ".py"}[s.Lang]
	return fmt.Sprintf("%s_%d%s", base, s.Line, ext)
}

// tscRef and pythonRef match a compiler's reference to a line of a program:
// tsc's "name(line,col)" and Python's `File "dir/name", line N`.
var (
	tscRef    = regexp.MustCompile(`([\w.-]+\.(?:ts|js))\((\d+),(\d+)\)`)
	pythonRef = regexp.MustCompile(`File "[^"]*?([\w.-]+\.py)", line (\d+)`)
)

// MapDiagnostics rewrites the references of a compiler's output to lines
// of programs (tsc's "x_12.ts(3,5)", Python's `File ".../x_12.py", line 3`)
// into the markdown lines they came from ("docs/x.md:14:5").
func MapDiagnostics(out string, programs []Program) string {
	byName := make(map[string]Program, len(programs))
	for _, p := range programs {
		byName[p.Name] = p
	}
	where := func(name, line string) (string, bool) {
		p, ok := byName[name]
		n, err := strconv.Atoi(line)
		if !ok || err != nil || n < 1 || n > len(p.Origins) {
			return "", false
		}
		return p.Origins[n-1].String(), true
	}
	out = tscRef.ReplaceAllStringFunc(out, func(m string) string {
		g := tscRef.FindStringSubmatch(m)
		if w, ok := where(g[1], g[2]); ok {
			return w + ":" + g[3] + " (" + m + ")"
		}
		return m
	})
	return pythonRef.ReplaceAllStringFunc(out, func(m string) string {
		g := pythonRef.FindStringSubmatch(m)
		if w, ok := where(g[1], g[2]); ok {
			return w + " (" + m + ")"
		}
		return m
	})
}
