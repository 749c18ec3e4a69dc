package tools

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Register refuses a bad cost, cache or approval rule with an error that
// names the field, and registers nothing.
func TestRegisterRejectsPolicy(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	good := Tool{Name: "search_web", InputSchema: SearchWebSchema, Handler: nopHandler, Idempotent: true}
	cases := []struct {
		name  string
		edit  func(*Tool)
		want  string // the whole error text
		field string // RegisterError.Field
	}{
		{"negative cost", func(tl *Tool) { tl.Cost = -3 },
			`tools: register "search_web": cost must be >= 0 (0 is the default, 1), got -3`, "cost"},
		{"huge cost", func(tl *Tool) { tl.Cost = CostMax + 1 },
			`tools: register "search_web": cost must be at most 1000000, got 1000001`, "cost"},
		{"cache without ttl", func(tl *Tool) { tl.Cache = &CachePolicy{} },
			`tools: register "search_web": cache.ttl is required and must be positive, got 0s`, "cache.ttl"},
		{"cache negative ttl", func(tl *Tool) { tl.Cache = &CachePolicy{TTL: -time.Minute} },
			`tools: register "search_web": cache.ttl is required and must be positive, got -1m0s`, "cache.ttl"},
		{"cache ttl under a second", func(tl *Tool) { tl.Cache = &CachePolicy{TTL: 500 * time.Millisecond} },
			`tools: register "search_web": cache.ttl must be at least 1s, got 500ms`, "cache.ttl"},
		{"cache ttl over a week", func(tl *Tool) { tl.Cache = &CachePolicy{TTL: 8 * 24 * time.Hour} },
			`tools: register "search_web": cache.ttl must be at most 168h0m0s (7 days), got 192h0m0s`, "cache.ttl"},
		{"cache bad scope", func(tl *Tool) { tl.Cache = &CachePolicy{TTL: time.Minute, Scope: "Global"} },
			`tools: register "search_web": cache.scope must be tenant or global, not "Global"`, "cache.scope"},
		{"cache on a tool that is not idempotent", func(tl *Tool) {
			tl.Idempotent = false
			tl.Cache = &CachePolicy{TTL: time.Minute}
		}, `tools: register "search_web": cache needs an idempotent tool (Idempotent: true) or a read-only one (Hints.ReadOnly: true): a cached result is served instead of running the tool again`, "cache"},
		{"cache on a tool read-only false", func(tl *Tool) {
			tl.Idempotent = false
			tl.Hints.ReadOnly = &no
			tl.Cache = &CachePolicy{TTL: time.Minute}
		}, `tools: register "search_web": cache needs an idempotent tool`, "cache"},
		{"approval negative timeout", func(tl *Tool) { tl.Approval = &ApprovalRule{Timeout: -time.Second} },
			`tools: register "search_web": approval.timeout must be positive`, "approval.timeout"},
		{"approval long timeout", func(tl *Tool) { tl.Approval = &ApprovalRule{Timeout: 8 * 24 * time.Hour} },
			`tools: register "search_web": approval.timeout must be at most 168h0m0s`, "approval.timeout"},
		{"approval bad field", func(tl *Tool) {
			tl.Approval = &ApprovalRule{When: []ApprovalMatch{{Field: "path", Pattern: "/etc/*"}}}
		}, `tools: register "search_web": approval.when[0].field "path" must name a field of the input, as input.path or input.target.host`, "approval.when[0].field"},
		{"approval bad glob", func(tl *Tool) {
			tl.Approval = &ApprovalRule{When: []ApprovalMatch{{Field: "input.path", Pattern: "/etc/*"}, {Field: "input.path", Pattern: "/a/[b"}}}
		}, `tools: register "search_web": approval.when[1].pattern "/a/[b" is not a valid glob: syntax error in pattern`, "approval.when[1].pattern"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tl := good
			tc.edit(&tl)
			r := NewRegistry()
			err := r.Register(tl)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Register: %v\nwant %s", err, tc.want)
			}
			var re *RegisterError
			if !errors.As(fmt.Errorf("loading: %w", err), &re) || re.Field != tc.field || re.Reason == "" ||
				!strings.HasSuffix(err.Error(), re.Reason) {
				t.Errorf("RegisterError of %v: %+v, want field %q and the reason the message ends with", err, re, tc.field)
			}
			if names := r.Names(); len(names) != 0 {
				t.Errorf("rejected tool is registered: %v", names)
			}
		})
	}
	// What is accepted: a read-only tool may cache without being
	// idempotent, the bounds themselves, and the default cost.
	ok := []Tool{good, good, good, good}
	ok[0].Idempotent, ok[0].Hints.ReadOnly, ok[0].Cache = false, &yes, &CachePolicy{TTL: CacheTTLMin, Scope: CacheScopeGlobal}
	ok[1].Cost, ok[1].Cache = CostMax, &CachePolicy{TTL: CacheTTLMax, Scope: CacheScopeTenant}
	ok[2].Approval = &ApprovalRule{Timeout: ApprovalTimeoutMax, When: []ApprovalMatch{{Field: "input.target.host", Pattern: "*.prod.example"}}}
	ok[3].Approval = &ApprovalRule{}
	for i, tl := range ok {
		if err := NewRegistry().Register(tl); err != nil {
			t.Errorf("good tool %d: %v", i, err)
		}
	}
}

// The registry keeps its own copy of a tool's cache and approval rule: the
// caller changing its values later changes nothing registered.
func TestRegisterOwnsPolicy(t *testing.T) {
	t.Parallel()
	cache := &CachePolicy{TTL: time.Minute}
	rule := &ApprovalRule{When: []ApprovalMatch{{Field: "input.path", Pattern: "/etc/**"}}}
	r := NewRegistry()
	r.MustRegister(Tool{Name: "t", InputSchema: objectSchema, Handler: nopHandler, Idempotent: true, Cache: cache, Approval: rule})
	cache.TTL = -1
	rule.When[0].Pattern = "[bad"
	rt, _ := r.Lookup("t")
	if rt.Cache.TTL != time.Minute || rt.Approval.When[0].Pattern != "/etc/**" {
		t.Errorf("registered cache %+v, rule %+v; changed with the caller's", rt.Cache, rt.Approval)
	}
}
