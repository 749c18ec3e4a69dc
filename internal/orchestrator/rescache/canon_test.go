package rescache

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/tools"
)

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{}`},
		{` { "b" : 1 , "a" : [ 1 , 2 ] } `, `{"a":[1,2],"b":1}`},
		{`{"z":{"y":1,"x":{"b":null,"a":true}},"a":false}`, `{"a":false,"z":{"x":{"a":true,"b":null},"y":1}}`},
		{`{"n":1.50,"e":1E2,"m":-0}`, `{"e":1E2,"m":-0,"n":1.50}`}, // numbers as written
		{`{"s":"\u0041\/\t\"\\<>&é"}`, `{"s":"A/\u0009\"\\<>&é"}`},
		{"{\"k\\u00e9\":\"\\u2028\"}", "{\"ké\":\"\u2028\"}"},
		{`{"a":[{"d":1,"c":2},[],{}]}`, `{"a":[{"c":2,"d":1},[],{}]}`},
		{`{"B":1,"a":2,"_":3}`, `{"B":1,"_":3,"a":2}`}, // by bytes
	} {
		got, err := Canonical([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("Canonical(%s) = %s: not valid JSON", tc.in, got)
		}
	}
}

func TestCanonicalRefuses(t *testing.T) {
	for _, in := range []string{
		``, ` `, `null`, `[]`, `[{"a":1}]`, `"x"`, `1`, `true`,
		`{`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{} {}`, `{}x`, `{"a":01}`,
		`{"a":1,"a":1}`, `{"x":{"b":1,"b":2}}`, // a key twice
		"{\"a\":\"\xff\"}",                                         // invalid UTF-8
		`{"a":"\ud800"}`, `{"a":"\uDFFF"}`, `{"a":"\ud83d\ude00"}`, // surrogates: not cached
	} {
		if got, err := Canonical([]byte(in)); err == nil {
			t.Errorf("Canonical(%q) = %s; want an error", in, got)
		}
	}
}

func call(tool, version, tenant, scope, input string) *policy.Call {
	c := &policy.Call{Tenant: tenant, Tool: tool, Input: json.RawMessage(input), Session: "s", ID: "toolu_1"}
	c.Info = pooltype.ToolInfo{Version: version, Cache: &tools.CachePolicy{Scope: scope}}
	return c
}

func TestKey(t *testing.T) {
	base := call("search", "v1", "acme", "", `{"q":"go","n":3}`)
	k, ok := keyOf(base)
	if !ok || !validKey(k) {
		t.Fatalf("key %q, %v", k, ok)
	}
	same := []*policy.Call{
		call("search", "v1", "acme", "", ` {"n":3, "q":"go"} `),
		call("search", "v1", "acme", "tenant", "{\n\t\"q\": \"\\u0067o\",\n\t\"n\": 3\n}"),
	}
	other := call("search", "v1", "acme", "", `{"q":"go","n":3}`)
	other.Session, other.ID, other.Key = "another", "toolu_9", "k"
	same = append(same, other) // the session, id and key name do not count
	for _, c := range same {
		if got, _ := keyOf(c); got != k {
			t.Errorf("key of %s = %s; want %s", c.Input, got, k)
		}
	}
	differ := map[string]*policy.Call{
		"tool":         call("search2", "v1", "acme", "", `{"q":"go","n":3}`),
		"version":      call("search", "v2", "acme", "", `{"q":"go","n":3}`),
		"tenant":       call("search", "v1", "other", "", `{"q":"go","n":3}`),
		"no tenant":    call("search", "v1", "", "", `{"q":"go","n":3}`),
		"global":       call("search", "v1", "acme", "global", `{"q":"go","n":3}`),
		"value":        call("search", "v1", "acme", "", `{"q":"Go","n":3}`),
		"number text":  call("search", "v1", "acme", "", `{"q":"go","n":3.0}`),
		"number type":  call("search", "v1", "acme", "", `{"q":"go","n":"3"}`),
		"extra member": call("search", "v1", "acme", "", `{"q":"go","n":3,"x":null}`),
		"nesting":      call("search", "v1", "acme", "", `{"q":["go"],"n":3}`),
		// the fields cannot run into each other
		"shifted": call("searchv", "1", "acme", "", `{"q":"go","n":3}`),
	}
	seen := map[string]string{k: "base"}
	for name, c := range differ {
		got, ok := keyOf(c)
		if !ok {
			t.Fatalf("%s: no key", name)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%s has the key of %s", name, prev)
		}
		seen[got] = name
	}
	// scope global: the tenant does not count
	g1, _ := keyOf(call("search", "v1", "acme", "global", `{"q":"go"}`))
	g2, _ := keyOf(call("search", "v1", "other", "global", `{"q":"go"}`))
	if g1 != g2 {
		t.Error("a global entry differs by tenant")
	}
	if _, ok := keyOf(call("search", "v1", "acme", "", `["go"]`)); ok {
		t.Error("a non-object input has a key")
	}
	var s Store
	s.usable.Store(true)
	if got, _ := s.Key(base); got != k {
		t.Error("Store.Key differs from keyOf")
	}
}

func TestValidKey(t *testing.T) {
	k, _ := keyOf(call("t", "", "", "", `{}`))
	for _, bad := range []string{"", k[:63], k + "0", strings.ToUpper(k), k[:63] + "*", k[:63] + ".", k[:63] + ">"} {
		if validKey(bad) {
			t.Errorf("validKey(%q)", bad)
		}
	}
	if !validKey(k) {
		t.Errorf("validKey(%q) = false", k)
	}
}

// FuzzCanonical checks that the canonical form is a fixed point, valid
// JSON, and equal for any two inputs that decode to the same value.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{}`, `{"b":1,"a":[true,null,{"d":"x","c":-1.5e3}]}`, `{"s":"\u00e9\n"}`, ` {"a" : {"b" : {}} } `,
		`{"k\"":[[],[{}],"\\",-0.0e-1]}`, `{"a":1,"a":2}`, `{"x":[1,2,]}`, `[]`, `{"\u0041":1,"A":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Canonical([]byte(in))
		ref, refErr := canonicalRef([]byte(in))
		if (err == nil) != (refErr == nil) || string(got) != string(ref) {
			t.Fatalf("Canonical(%q) = %s, %v; the token-based reference: %s, %v", in, got, err, ref, refErr)
		}
		if err != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("Canonical(%q) = %s: not valid JSON", in, got)
		}
		again, err := Canonical(got)
		if err != nil || string(again) != string(got) {
			t.Fatalf("not a fixed point: %s → %s, %v", got, again, err)
		}
		// the same value written another way: re-encoded by encoding/json
		// (sorted keys, other escapes), it has the same form
		var v map[string]any
		dec := json.NewDecoder(strings.NewReader(in))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("Canonical accepted %q that encoding/json refuses: %v", in, err)
		}
		re, _ := json.MarshalIndent(v, "", "  ")
		if c2, err := Canonical(re); err != nil || string(c2) != string(got) {
			t.Fatalf("%q and %s: %s ≠ %s (%v)", in, re, got, c2, err)
		}
	})
}

// A Store that did not start (its bucket could not be made) gives no key:
// the gate then runs the call without a look-up, as for a tool that does
// not cache.
func TestKeyOfAStoreNotRunning(t *testing.T) {
	s := &Store{}
	c := &policy.Call{Tool: "search", Input: json.RawMessage(`{"q":"x"}`), Info: pooltype.ToolInfo{Cache: &tools.CachePolicy{TTL: time.Minute}}}
	if k, ok := s.Key(c); ok || k != "" {
		t.Fatalf("Key of a Store not started = %q, %v; want none", k, ok)
	}
}
