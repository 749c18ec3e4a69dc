package catalog

import (
	"errors"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolpool/toolpool/internal/infra/subject"
	"github.com/toolpool/toolpool/pkg/envelope"
	"github.com/toolpool/toolpool/pkg/tools"
)

// entryCheck is the checking of one entry (tool i) of the file: it turns a
// problem with one of the entry's fields into an *Error at the field's
// line.
type entryCheck struct {
	p    *parser
	item *yaml.Node // the entry's mapping
	tool string     // the entry's label in errors (toolLabel)
}

// at is the line of the field at path ("exec.command[0]"): a list item's
// is its list's; a field the entry lacks is on the entry's first line.
func (c *entryCheck) at(path string) int {
	if k, _ := findPath(c.item, strings.Split(path, "[")[0]); k != nil {
		return k.Line
	}
	return c.item.Line
}

// bad is the *Error of field.
func (c *entryCheck) bad(field, format string, args ...any) error {
	return c.p.failf(c.at(field), c.tool, field, format, args...)
}

// entry checks tool i of the file and returns its Entry: the fields every
// entry has are checked once, here, with the rules of the entry's backend
// (backendRules), then the backend checks its own section.
func (p *parser) entry(i int, s *toolSpec) (*Entry, error) {
	c := &entryCheck{p: p, item: p.items[i], tool: p.toolLabel(i)}
	e := &Entry{Name: s.Name, Line: c.item.Line}
	rules, err := c.identity(e, s)
	if err != nil {
		return nil, err
	}
	if err := c.model(e, s, rules); err != nil {
		return nil, err
	}
	if err := c.attempts(e, s, rules); err != nil {
		return nil, err
	}
	if err := c.sharing(e, s); err != nil {
		return nil, err
	}
	if err := c.policy(e, s, rules); err != nil {
		return nil, err
	}
	if rules.check != nil {
		if field, err := rules.check(p, e, s); err != nil {
			return nil, c.bad(field, "%v", err)
		}
	}
	if rules.defines {
		// Register's own checks (schema compiles, root type object, …) on a
		// scratch registry: whatever it refuses now would stop the worker.
		t, err := e.tool(p.opts)
		if err == nil {
			err = tools.NewRegistry().Register(t)
		}
		if err != nil {
			field, msg := registerField(err)
			return nil, c.bad(field, "%s", msg)
		}
	}
	return e, nil
}

// identity checks the entry's name and backend, and that the entry has
// the backend's section of settings and no other backend's; it returns the
// backend's rules.
func (c *entryCheck) identity(e *Entry, s *toolSpec) (backendRules, error) {
	switch {
	case s.Name == "":
		return backendRules{}, c.bad("name", "is required")
	case !envelope.ValidToolName(s.Name):
		return backendRules{}, c.bad("name", "must be %s (%s), as the Messages API requires", subject.TokenChars, tools.NamePattern)
	}
	e.Backend = Backend(s.Backend)
	rules, ok := backendRulesOf[e.Backend]
	switch {
	case s.Backend == "":
		return rules, c.bad("backend", "is required: one of webhook, exec, builtin, mcp")
	case !ok:
		return rules, c.bad("backend", "must be one of webhook, exec, builtin, mcp, not %q", s.Backend)
	case rules.section != nil && !rules.section(s):
		return rules, c.bad("backend", "is %s, but the entry has no %s settings", e.Backend, e.Backend)
	}
	for _, other := range sectionBackends {
		if other != e.Backend && backendRulesOf[other].section(s) {
			return rules, c.bad(string(other), "is not allowed with backend %s", e.Backend)
		}
	}
	if rules.refuse != nil {
		if field, reason := rules.refuse(s); field != "" {
			return rules, c.bad(field, "is not allowed with backend %s: %s", e.Backend, reason)
		}
	}
	return rules, nil
}

// model checks what the model sees of the tool: its description and input
// schema, which an entry that defines its tool must give.
func (c *entryCheck) model(e *Entry, s *toolSpec, rules backendRules) error {
	if s.Description != nil {
		e.Description = strings.TrimSpace(*s.Description)
		if e.Description == "" {
			return c.bad("description", "is empty; tell the model what the tool does and when to use it")
		}
	} else if rules.defines {
		return c.bad("description", "is required: the model reads it to decide when to call the tool")
	}
	hasSchema := s.InputSchema.Kind != 0
	switch {
	case rules.overlay && hasSchema:
		return c.bad("input_schema", "is not allowed with backend %s: a built-in tool keeps its own schema", e.Backend)
	case rules.defines && !hasSchema:
		return c.bad("input_schema", `is required: a JSON Schema object such as {type: object, properties: {…}}`)
	case hasSchema:
		if s.InputSchema.Kind != yaml.MappingNode {
			return c.bad("input_schema", "must be a mapping (a JSON Schema object)")
		}
		schema, err := nodeJSON(&s.InputSchema)
		if err != nil {
			return c.bad("input_schema", "%v", err)
		}
		e.InputSchema = schema
	}
	return nil
}

// attempts checks how one attempt of the tool runs and whether it may run
// again: timeout, retry, hints and idempotent.
func (c *entryCheck) attempts(e *Entry, s *toolSpec, rules backendRules) error {
	if s.Timeout != nil {
		d, err := parseDuration(*s.Timeout)
		switch {
		case err != nil:
			return c.bad("timeout", "%v", err)
		case d <= 0:
			return c.bad("timeout", "must be positive, got %s", *s.Timeout)
		case d > TimeoutMax:
			return c.bad("timeout", "must be at most %s, got %s", TimeoutMax, *s.Timeout)
		}
		e.Timeout = d
	}
	if s.Retry != nil {
		pol, field, err := checkRetry(s.Retry, rules.overlay)
		if err != nil {
			return c.bad("retry."+field, "%v", err)
		}
		e.Retry = pol
	}
	if s.Hints != nil {
		h, field, err := checkHints(s.Hints)
		if err != nil {
			return c.bad(field, "%v", err)
		}
		e.Hints = h
	}
	if s.Idempotent != nil {
		if rules.overlay {
			return c.bad("idempotent", "is not allowed with backend %s: a built-in tool's code decides it", e.Backend)
		}
		e.Idempotent = *s.Idempotent
	}
	return nil
}

// sharing checks how the tool's calls share it: concurrency,
// pause_on_rate_limit_above, fairness and per_key.
func (c *entryCheck) sharing(e *Entry, s *toolSpec) error {
	if s.Concurrency != nil {
		if *s.Concurrency < 1 {
			return c.bad("concurrency", "must be at least 1, got %d", *s.Concurrency)
		}
		e.Concurrency = *s.Concurrency
	}
	if s.PauseAbove != nil {
		d, err := parseDuration(*s.PauseAbove)
		switch {
		case err != nil:
			return c.bad("pause_on_rate_limit_above", "%v", err)
		case d <= 0:
			return c.bad("pause_on_rate_limit_above", "must be positive, got %s (leave it out to never pause)", *s.PauseAbove)
		}
		e.PauseOn429Above = d
	}
	if s.Fairness != nil {
		if reason := tools.CheckFairness(*s.Fairness); reason != "" || *s.Fairness == "" {
			if reason == "" {
				reason = "is empty; leave it out to share between tenants"
			}
			return c.bad("fairness", "%s", reason)
		}
		e.Fairness = *s.Fairness
	}
	if s.PerKey != nil {
		l, field, err := checkPerKey(s.PerKey)
		if err != nil {
			if field != "" {
				field = "." + field
			}
			return c.bad("per_key"+field, "%v", err)
		}
		e.PerKey = l
	}
	return nil
}

// checkHints checks an entry's hints: idempotentHint is the entry's own
// idempotent key (it decides retries too), and a read-only tool cannot be
// destructive.
func checkHints(s *hintsSpec) (tools.Hints, string, error) {
	h := tools.Hints{ReadOnly: s.ReadOnly, Destructive: s.Destructive, OpenWorld: s.OpenWorld}
	switch {
	case s.Idempotent != nil:
		return h, "hints.idempotent", errors.New("is not a hint here: set the entry's idempotent key (it is listed as idempotentHint, and it also decides whether a call may run again)")
	case h.ReadOnly != nil && *h.ReadOnly && h.Destructive != nil && *h.Destructive:
		return h, "hints.destructive", errors.New("cannot be true for a read-only tool (hints.read_only: true)")
	}
	return h, "", nil
}
