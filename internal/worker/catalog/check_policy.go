package catalog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolpool/toolpool/pkg/tools"
)

// errNotCacheable is why cache is refused on a tool that is neither
// idempotent nor read-only.
var errNotCacheable = errors.New("needs idempotent: true or hints: {read_only: true}: a cached result is served instead of running the tool again")

// policy checks what the orchestrators apply before a call runs: cost,
// cache and approval. Every backend may set them; for an mcp entry they
// apply to each tool of the server (cache to those that are idempotent or
// read-only), for a builtin entry they are laid over the built-in tool.
func (c *entryCheck) policy(e *Entry, s *toolSpec, rules backendRules) error {
	if s.Cost != nil {
		switch n := *s.Cost; {
		case n < 1:
			return c.bad("cost", "must be at least 1, got %d (leave it out for 1 unit per call)", n)
		case n > tools.CostMax:
			return c.bad("cost", "must be at most %d, got %d", tools.CostMax, n)
		}
		e.Cost = *s.Cost
	}
	if s.Cache != nil {
		p, field, err := checkCache(s.Cache)
		if err != nil {
			at := joinPath("cache", field)
			if k, _ := findPath(c.item, at); k == nil {
				at = "cache" // a key left out: the line of cache
			}
			return c.p.failf(c.at(at), c.tool, joinPath("cache", field), "%v", err)
		}
		e.Cache, e.cacheLine = p, c.at("cache")
		if err := cacheAllowed(e, s, rules); err != nil {
			return c.bad("cache", "%v", err)
		}
	}
	if s.Approval.Kind != 0 {
		rule, err := c.approval(&s.Approval)
		if err != nil {
			return err
		}
		e.Approval = rule
	}
	return nil
}

// cacheAllowed refuses a cache on an entry that says its tool is neither
// idempotent nor read-only. A builtin entry's tool is checked once it is
// known (Tools); an mcp entry's tools each by the server's hints, unless
// the entry rules both out.
func cacheAllowed(e *Entry, s *toolSpec, rules backendRules) error {
	switch {
	case rules.overlay:
		return nil
	case e.Backend == BackendMCP:
		notReadOnly := e.Hints.ReadOnly != nil && !*e.Hints.ReadOnly
		if s.Idempotent != nil && !*s.Idempotent && notReadOnly {
			return errors.New("needs tools that are idempotent or read-only, and the entry says its tools are neither (idempotent: false, hints: {read_only: false}): a cached result is served instead of running the tool again")
		}
		return nil
	case !tools.Cacheable(e.Idempotent, e.Hints):
		return errNotCacheable
	}
	return nil
}

// checkCache checks a cache mapping: ttl required, between
// tools.CacheTTLMin and tools.CacheTTLMax; scope tenant or global. It
// names the faulty field ("ttl", "scope"; "" for the mapping).
func checkCache(s *cacheSpec) (*tools.CachePolicy, string, error) {
	p := &tools.CachePolicy{}
	if s.TTL == nil {
		return nil, "ttl", errors.New("is required: how long a result is kept, such as 30s, 10m or 1d")
	}
	d, err := parseLongDuration(*s.TTL)
	switch {
	case err != nil:
		return nil, "ttl", err
	case d < tools.CacheTTLMin:
		return nil, "ttl", fmt.Errorf("must be at least %s, got %s", tools.CacheTTLMin, *s.TTL)
	case d > tools.CacheTTLMax:
		return nil, "ttl", fmt.Errorf("must be at most 7d (%s), got %s", tools.CacheTTLMax, *s.TTL)
	}
	p.TTL = d
	if s.Scope != nil {
		switch *s.Scope {
		case tools.CacheScopeTenant, tools.CacheScopeGlobal:
			p.Scope = *s.Scope
		default:
			return nil, "scope", fmt.Errorf("must be %s (the default: shared within a tenant) or %s (shared by every tenant), not %q",
				tools.CacheScopeTenant, tools.CacheScopeGlobal, *s.Scope)
		}
	}
	return p, "", nil
}

// parseLongDuration reads a duration as parseDuration does, and also with
// a leading number of days: "7d", "1d12h".
func parseLongDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if i := strings.IndexByte(t, 'd'); i > 0 {
		days, err := strconv.Atoi(t[:i])
		if err == nil && days >= 0 && days <= 365 {
			d := time.Duration(days) * 24 * time.Hour
			if rest := t[i+1:]; rest != "" {
				r, err := time.ParseDuration(rest)
				if err != nil || r < 0 {
					return 0, durationError(s)
				}
				d += r
			}
			return d, nil
		}
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, durationError(s)
	}
	return d, nil
}

func durationError(s string) error {
	return fmt.Errorf("must be a duration such as 30s, 10m, 1h30m or 7d, not %q", s)
}

// approval checks an approval value: "always", or a mapping of when (input
// fields to a glob or a list of globs) and timeout. Its errors name the
// line and the path of the value at fault ("approval.when.input.path[1]").
func (c *entryCheck) approval(n *yaml.Node) (*tools.ApprovalRule, error) {
	n, err := c.resolve(n, "approval")
	if err != nil {
		return nil, err
	}
	switch {
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null":
		return nil, nil // left out
	case n.Kind == yaml.ScalarNode && n.Value == "always":
		return &tools.ApprovalRule{}, nil
	case n.Kind != yaml.MappingNode:
		return nil, c.p.failf(n.Line, c.tool, "approval",
			"must be always, or a mapping with when (input fields and the globs that need approval) and timeout, not %s", valueWords(n))
	}
	rule := &tools.ApprovalRule{}
	err = c.eachKey(n, "approval", func(key string, k, v *yaml.Node) error {
		switch key {
		case "timeout":
			d, err := c.approvalTimeout(v)
			rule.Timeout = d
			return err
		case "when":
			var err error
			rule.When, err = c.approvalWhen(v)
			return err
		}
		return c.p.failf(k.Line, c.tool, "approval."+key, "unknown key (known keys: when, timeout)")
	})
	if err != nil {
		return nil, err
	}
	if field, problem := rule.Check(); field != "" {
		// Each condition and the timeout are checked where they are
		// written: this is a safety net.
		return nil, c.p.failf(n.Line, c.tool, "approval."+field, "%s", problem)
	}
	return rule, nil
}

// approvalTimeout checks approval.timeout: positive, at most
// tools.ApprovalTimeoutMax.
func (c *entryCheck) approvalTimeout(v *yaml.Node) (time.Duration, error) {
	const field = "approval.timeout"
	v, err := c.resolve(v, field)
	if err != nil {
		return 0, err
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		return 0, c.p.failf(v.Line, c.tool, field, "must be a duration such as 30m or 1d, not %s", valueWords(v))
	}
	d, err := parseLongDuration(v.Value)
	switch {
	case err != nil:
		return 0, c.p.failf(v.Line, c.tool, field, "%v", err)
	case d <= 0:
		return 0, c.p.failf(v.Line, c.tool, field, "must be positive, got %s (leave it out for %s)", v.Value, tools.ApprovalTimeoutDefault)
	case d > tools.ApprovalTimeoutMax:
		return 0, c.p.failf(v.Line, c.tool, field, "must be at most 7d (%s), got %s", tools.ApprovalTimeoutMax, v.Value)
	}
	return d, nil
}

// approvalWhen checks approval.when: a mapping of input fields
// ("input.path") to a glob or a list of globs, at least one.
func (c *entryCheck) approvalWhen(v *yaml.Node) ([]tools.ApprovalMatch, error) {
	const field = "approval.when"
	v, err := c.resolve(v, field)
	if err != nil {
		return nil, err
	}
	if v.Kind != yaml.MappingNode || len(v.Content) == 0 {
		return nil, c.p.failf(v.Line, c.tool, field,
			"must be a mapping of input fields to globs, as {input.path: \"/etc/**\"}, not %s (leave when out so that every call needs approval)", valueWords(v))
	}
	var when []tools.ApprovalMatch
	err = c.eachKey(v, field, func(key string, k, pv *yaml.Node) error {
		at := field + "." + key
		pv, err := c.resolve(pv, at)
		if err != nil {
			return err
		}
		add := func(p *yaml.Node, label string) error {
			pattern, ok := patternText(p)
			if !ok {
				return c.p.failf(p.Line, c.tool, label, "must be a glob (a string), not %s", valueWords(p))
			}
			m := tools.ApprovalMatch{Field: key, Pattern: pattern}
			if _, problem := (&tools.ApprovalRule{When: []tools.ApprovalMatch{m}}).Check(); problem != "" {
				return c.p.failf(p.Line, c.tool, label, "%s", problem)
			}
			when = append(when, m)
			return nil
		}
		if pv.Kind != yaml.SequenceNode {
			return add(pv, at)
		}
		if len(pv.Content) == 0 {
			return c.p.failf(pv.Line, c.tool, at, "lists no glob; give at least one")
		}
		for i, item := range pv.Content {
			label := at + "[" + strconv.Itoa(i) + "]"
			item, err := c.resolve(item, label)
			if err != nil {
				return err
			}
			if err := add(item, label); err != nil {
				return err
			}
		}
		return nil
	})
	return when, err
}

// patternText is the glob a scalar gives: its text, a boolean in its JSON
// form (the form the input's value is matched in).
func patternText(n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return "", false
	}
	if n.ShortTag() == "!!bool" {
		var b bool
		if n.Decode(&b) == nil {
			return strconv.FormatBool(b), true
		}
	}
	return n.Value, true
}

// eachKey calls f with each key of mapping m (at path), in file order,
// refusing a key given twice and merge keys.
func (c *entryCheck) eachKey(m *yaml.Node, path string, f func(key string, k, v *yaml.Node) error) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			return c.p.failf(k.Line, c.tool, path, "keys must be plain strings (merge keys, <<, are not supported here)")
		}
		if line, dup := seen[k.Value]; dup {
			return c.p.failf(k.Line, c.tool, path+"."+k.Value, "appears twice (first at line %d)", line)
		}
		seen[k.Value] = k.Line
		if err := f(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

// resolve follows an alias (*name) to the value it names.
func (c *entryCheck) resolve(n *yaml.Node, path string) (*yaml.Node, error) {
	for depth := 0; n.Kind == yaml.AliasNode; depth++ {
		if n.Alias == nil || depth > 100 {
			return nil, c.p.failf(n.Line, c.tool, path, "has aliases nested too deeply")
		}
		n = n.Alias
	}
	return n, nil
}
