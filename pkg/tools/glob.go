package tools

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// An approval rule's globs are matched against input the model wrote, on
// the orchestrator's path of every call of the tool: a matcher that
// backtracks (path.Match inside a loop per "**") takes time that grows as
// the input's length to the power of the number of "**" plus one — seconds
// for one 16 KB string against "**x**y**z", hours for a megabyte. Each glob
// is therefore turned into a regular expression once (Go's regexp runs in
// time linear in the input) with the same meaning: path.Match's syntax,
// where "*" and "?" do not match a "/" and a class may, plus "**", which
// matches any run of characters, "/" included. Two corners differ from
// path.Match, both towards matching: a class that holds "/" ("[^a]") is
// tried wherever it may stand (path.Match keeps the first place the part
// after a "*" fits, and may miss a match), and characters are whole UTF-8
// characters, never bytes of one.

// globCacheMax bounds the compiled globs kept; past it (globs announced by
// a fleet that changes its rules without end) a glob is compiled for each
// match.
const globCacheMax = 4096

var (
	globCache sync.Map // pattern → *regexp.Regexp; nil value: not a valid glob
	globCount atomic.Int64
)

// globRegexp is the compiled form of a glob, or nil for a glob that is not
// valid (it matches nothing, as path.Match's error says).
func globRegexp(pattern string) *regexp.Regexp {
	if re, ok := globCache.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	var re *regexp.Regexp
	if expr, ok := globToRegexp(pattern); ok {
		re = regexp.MustCompile(expr)
	}
	if globCount.Load() < globCacheMax {
		if _, loaded := globCache.LoadOrStore(pattern, re); !loaded {
			globCount.Add(1)
		}
	}
	return re
}

// globToRegexp translates a glob into an anchored regular expression; ok
// is false for a glob path.Match would call malformed.
func globToRegexp(pattern string) (string, bool) {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	for i := 0; i < len(pattern); {
		switch c := pattern[i]; {
		case strings.HasPrefix(pattern[i:], "**"):
			b.WriteString(`.*`)
			i += 2
		case c == '*':
			b.WriteString(`[^/]*`)
			i++
		case c == '?':
			b.WriteString(`[^/]`)
			i++
		case c == '[':
			class, n, ok := globClass(pattern[i+1:])
			if !ok {
				return "", false
			}
			b.WriteString(class)
			i += 1 + n
		case c == '\\':
			if i+1 == len(pattern) {
				return "", false
			}
			r, size := utf8.DecodeRuneInString(pattern[i+1:])
			b.WriteString(regexp.QuoteMeta(string(r)))
			i += 1 + size
		default:
			r, size := utf8.DecodeRuneInString(pattern[i:])
			b.WriteString(regexp.QuoteMeta(string(r)))
			i += size
		}
	}
	b.WriteString(`\z`)
	return b.String(), true
}

// globClass translates a character class, s being what follows its "[":
// an optional "^", then ranges ("a", "a-z", with "\" escaping a
// character), at least one, up to "]". It returns the class as a regular
// expression and how many bytes of s it used.
func globClass(s string) (expr string, n int, ok bool) {
	negated := strings.HasPrefix(s, "^")
	if negated {
		n = 1
	}
	var ranges []string
	for nrange := 0; ; nrange++ {
		if n < len(s) && s[n] == ']' && nrange > 0 {
			n++
			break
		}
		lo, used, ok := globEsc(s[n:])
		if !ok {
			return "", 0, false
		}
		n += used
		hi := lo
		if s[n] == '-' {
			if hi, used, ok = globEsc(s[n+1:]); !ok {
				return "", 0, false
			}
			n += 1 + used
		}
		if lo <= hi { // a range from high to low holds nothing
			ranges = append(ranges, `\x{`+strconv.FormatInt(int64(lo), 16)+`}-\x{`+strconv.FormatInt(int64(hi), 16)+`}`)
		}
	}
	switch {
	case len(ranges) == 0 && negated:
		return `.`, n, true // not in an empty class: any character
	case len(ranges) == 0:
		return `[^\x00-\x{10FFFF}]`, n, true // in an empty class: nothing
	case negated:
		return `[^` + strings.Join(ranges, "") + `]`, n, true
	}
	return `[` + strings.Join(ranges, "") + `]`, n, true
}

// globEsc reads one character of a class, escaped or not, as path.Match
// does: not "-" or "]" unescaped, and something must follow it.
func globEsc(s string) (r rune, n int, ok bool) {
	if s == "" || s[0] == '-' || s[0] == ']' {
		return 0, 0, false
	}
	if s[0] == '\\' {
		n = 1
		if len(s) == 1 {
			return 0, 0, false
		}
	}
	r, size := utf8.DecodeRuneInString(s[n:])
	if r == utf8.RuneError && size == 1 {
		return 0, 0, false
	}
	n += size
	return r, n, n < len(s)
}
