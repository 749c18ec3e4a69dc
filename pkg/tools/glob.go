package tools

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// globMatch matches s against a glob: path.Match's syntax, where "*" does
// not cross a "/", plus "**", which does. The glob is translated once into
// a regular expression (RE2: time linear in s, whatever the pattern), so
// that a long input value cannot make an approval rule's check expensive:
// a "**" tried at every split of s took seconds on a 16 kB value. A bad
// pattern matches nothing (ApprovalRule.Check refuses it).
func globMatch(pattern, s string) bool {
	re := globRegexp(pattern)
	return re != nil && re.MatchString(s)
}

// globCache keeps the compiled globs (nil for a bad pattern), up to
// globCacheMax patterns: catalogs name a few; beyond that a glob is
// compiled at each use.
var (
	globCache  sync.Map // pattern → *regexp.Regexp
	globCached atomic.Int32
)

const globCacheMax = 4096

// globRegexp is the compiled glob, nil for a bad pattern.
func globRegexp(pattern string) *regexp.Regexp {
	if v, ok := globCache.Load(pattern); ok {
		return v.(*regexp.Regexp)
	}
	var re *regexp.Regexp
	if expr, ok := globExpr(pattern); ok {
		re, _ = regexp.Compile(expr)
	}
	if globCached.Load() < globCacheMax {
		if _, loaded := globCache.LoadOrStore(pattern, re); !loaded {
			globCached.Add(1)
		}
	}
	return re
}

// globExpr is the regular expression of a glob, as path.Match reads it
// (plus "**"); ok is false for a bad pattern.
func globExpr(p string) (expr string, ok bool) {
	var b strings.Builder
	b.WriteString(`\A(?s:`)
	for i := 0; i < len(p); {
		switch p[i] {
		case '*':
			if i+1 < len(p) && p[i+1] == '*' {
				b.WriteString(`.*`)
				i += 2
			} else {
				b.WriteString(`[^/]*`)
				i++
			}
		case '?':
			b.WriteString(`[^/]`)
			i++
		case '\\':
			if i+1 == len(p) {
				return "", false
			}
			_, n := utf8.DecodeRuneInString(p[i+1:])
			b.WriteString(regexp.QuoteMeta(p[i+1 : i+1+n]))
			i += 1 + n
		case '[':
			class, n, ok := globClass(p[i+1:])
			if !ok {
				return "", false
			}
			b.WriteString(class)
			i += 1 + n
		default:
			_, n := utf8.DecodeRuneInString(p[i:])
			b.WriteString(regexp.QuoteMeta(p[i : i+n]))
			i += n
		}
	}
	b.WriteString(`)\z`)
	return b.String(), true
}

// globClass reads a character class after its "[" as path.Match does
// ("^" negates; ranges lo-hi; "\" escapes) and returns it as a regular
// expression and the bytes it took, "]" included.
func globClass(c string) (expr string, n int, ok bool) {
	negated := false
	if len(c) > 0 && c[0] == '^' {
		negated = true
		n++
	}
	var ranges []string
	for count := 0; ; count++ {
		if n < len(c) && c[n] == ']' && count > 0 {
			n++
			break
		}
		lo, k, ok := globEsc(c[n:])
		if !ok {
			return "", 0, false
		}
		n += k
		hi := lo
		if c[n] == '-' { // globEsc left at least one byte
			if hi, k, ok = globEsc(c[n+1:]); !ok {
				return "", 0, false
			}
			n += 1 + k
		}
		if lo <= hi { // path.Match's lo > hi matches nothing
			ranges = append(ranges, fmt.Sprintf(`\x{%x}-\x{%x}`, lo, hi))
		}
	}
	switch {
	case len(ranges) == 0 && negated:
		return `.`, n, true // any one character
	case len(ranges) == 0:
		return `[^\x{0}-\x{10ffff}]`, n, true // nothing
	case negated:
		return `[^` + strings.Join(ranges, "") + `]`, n, true
	}
	return `[` + strings.Join(ranges, "") + `]`, n, true
}

// globEsc reads one character of a class as path.Match's getEsc does: not
// "-" or "]", maybe escaped, and not the last byte of the pattern.
func globEsc(c string) (r rune, n int, ok bool) {
	if len(c) == 0 || c[0] == '-' || c[0] == ']' {
		return 0, 0, false
	}
	if c[0] == '\\' {
		n = 1
		if len(c) == 1 {
			return 0, 0, false
		}
	}
	r, size := utf8.DecodeRuneInString(c[n:])
	if r == utf8.RuneError && size == 1 {
		return 0, 0, false
	}
	n += size
	return r, n, n < len(c)
}
