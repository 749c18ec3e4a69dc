// Package docscheck checks the code in the project's documentation: every
// TypeScript, JavaScript and Python snippet of README.md and docs/ is
// extracted and compiled by its test (tsc --strict with the SDKs pinned in
// e2e/package.json; python3 -m py_compile), so a snippet that no longer
// type-checks fails the build. The package holds the extraction; the test
// does the compiling.
//
// A snippet is a fenced block whose info string is ts, typescript, js,
// javascript, mjs, python or py. Each is checked alone, as a module of its
// own, unless comment lines right above its fence say otherwise:
//
//	<!-- check: skip: REASON -->   not checked (a fragment); the reason is required
//	<!-- check: as NAME -->        others may build on this snippet as NAME
//	<!-- check: after NAME -->     checked with snippet NAME (of the same file) before it
//	<!-- check: prepend: CODE -->  checked with CODE before it (e.g. declare const POOL: string;)
package docscheck

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// Lang is a snippet's language, as the checker sees it.
type Lang string

// The languages checked.
const (
	TypeScript Lang = "ts"
	JavaScript Lang = "js"
	Python     Lang = "python"
)

// langs maps a fence's info string to its language.
var langs = map[string]Lang{
	"ts": TypeScript, "typescript": TypeScript,
	"js": JavaScript, "javascript": JavaScript, "mjs": JavaScript,
	"python": Python, "py": Python, "python3": Python,
}

// Snippet is one fenced block of code of a markdown file.
type Snippet struct {
	File string // the markdown file, as given to Extract
	Line int    // the line of the block's first code line (1-based)
	Lang Lang
	Code string // the block's lines, its indentation removed

	Skip    string   // why it is not checked; empty: checked
	Name    string   // the name others use in "after"
	After   []string // the snippets checked before it, by name
	Prepend []string // code checked before it
}

// directive is one "<!-- check: ... -->" line.
var directive = regexp.MustCompile(`^<!--\s*check:\s*(.*?)\s*-->$`)

// Extract returns the TypeScript, JavaScript and Python snippets of the
// markdown text src of file, in order, with the directives above each. A
// directive it does not know, a skip without a reason, a name given twice,
// an "after" naming no earlier snippet of the same language or an
// unclosed fence is an error naming file and line.
func Extract(file string, src []byte) ([]Snippet, error) {
	var (
		out     []Snippet
		pending *Snippet // the directives right above the current line
		names   = map[string]Lang{}
	)
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if m := directive.FindStringSubmatch(trimmed); m != nil {
			if pending == nil {
				pending = &Snippet{}
			}
			if err := apply(pending, m[1]); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", file, n, err)
			}
			continue
		}
		fence, info, ok := openFence(line)
		if !ok {
			if trimmed != "" && pending != nil {
				return nil, fmt.Errorf("%s:%d: a check directive is not right above a code block", file, n)
			}
			continue
		}
		s := Snippet{File: file, Line: n + 1}
		if pending != nil {
			s.Skip, s.Name, s.After, s.Prepend = pending.Skip, pending.Name, pending.After, pending.Prepend
			pending = nil
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		var code strings.Builder
		closed := false
		for sc.Scan() {
			n++
			l := sc.Text()
			if isCloseFence(l, fence) {
				closed = true
				break
			}
			code.WriteString(strings.TrimPrefix(l, indent))
			code.WriteByte('\n')
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: code block not closed", file, s.Line-1)
		}
		lang, checked := langs[strings.ToLower(info)]
		if !checked {
			if s.Name != "" || len(s.After) > 0 || len(s.Prepend) > 0 || s.Skip != "" {
				return nil, fmt.Errorf("%s:%d: a check directive above a %q block, which is not checked", file, s.Line-1, info)
			}
			continue
		}
		s.Lang, s.Code = lang, code.String()
		for _, a := range s.After {
			if l, ok := names[a]; !ok || l != lang {
				return nil, fmt.Errorf("%s:%d: check: after %s: no earlier %s snippet of this file is named %s", file, s.Line-1, a, lang, a)
			}
		}
		if s.Name != "" {
			if _, dup := names[s.Name]; dup {
				return nil, fmt.Errorf("%s:%d: check: as %s: the name is taken by an earlier snippet", file, s.Line-1, s.Name)
			}
			names[s.Name] = lang
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if pending != nil {
		return nil, fmt.Errorf("%s: a check directive at the end of the file is above no code block", file)
	}
	return out, nil
}

// apply adds the directive body d ("skip: why", "as NAME", ...) to s.
func apply(s *Snippet, d string) error {
	switch verb, rest, _ := strings.Cut(d, " "); strings.TrimSuffix(verb, ":") {
	case "skip":
		if strings.TrimSpace(rest) == "" {
			return fmt.Errorf("check: skip needs a reason: <!-- check: skip: why -->")
		}
		s.Skip = strings.TrimSpace(rest)
	case "as":
		if !validName(rest) {
			return fmt.Errorf("check: as %q: want one name of letters, digits, '-' or '_'", rest)
		}
		s.Name = rest
	case "after":
		if !validName(rest) {
			return fmt.Errorf("check: after %q: want one name of letters, digits, '-' or '_'", rest)
		}
		s.After = append(s.After, rest)
	case "prepend":
		if strings.TrimSpace(rest) == "" {
			return fmt.Errorf("check: prepend needs code")
		}
		s.Prepend = append(s.Prepend, rest)
	default:
		return fmt.Errorf("check: unknown directive %q; want skip: REASON, as NAME, after NAME or prepend: CODE", d)
	}
	return nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// openFence reports whether line opens a fenced block (up to three spaces
// of indentation outside a list; any inside one), returning the fence
// ("```" or "~~~", as long as given) and the info string's first word.
func openFence(line string) (fence, info string, ok bool) {
	t := strings.TrimLeft(line, " ")
	for _, c := range []byte{'`', '~'} {
		k := 0
		for k < len(t) && t[k] == c {
			k++
		}
		if k >= 3 {
			rest := strings.TrimSpace(t[k:])
			if c == '`' && strings.Contains(rest, "`") {
				return "", "", false // inline code, not a fence
			}
			word, _, _ := strings.Cut(rest, " ")
			word, _, _ = strings.Cut(word, "{")
			return t[:k], word, true
		}
	}
	return "", "", false
}

// isCloseFence reports whether line closes a block opened with fence.
func isCloseFence(line, fence string) bool {
	t := strings.TrimSpace(line)
	return len(t) >= len(fence) && strings.Trim(t, fence[:1]) == "" && strings.HasPrefix(t, fence)
}
