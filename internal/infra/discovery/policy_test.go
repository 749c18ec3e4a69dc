package discovery

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/pooltype"
	"github.com/toolpool/toolpool/pkg/tools"
)

// policyTool is a tool with a cost, a cache and an approval rule.
func policyTool(name, description string) tools.Tool {
	return tools.Tool{
		Name: name, Description: description,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Idempotent:  true,
		Cost:        5,
		Cache:       &tools.CachePolicy{TTL: 10 * time.Minute, Scope: tools.CacheScopeGlobal},
		Approval: &tools.ApprovalRule{When: []tools.ApprovalMatch{{Field: "input.path", Pattern: "/etc/**"}},
			Timeout: 30 * time.Minute},
		Handler: func(context.Context, json.RawMessage) (tools.Output, error) { return tools.Text("ok"), nil },
	}
}

var hex16 = regexp.MustCompile(`^[0-9a-f]{16}$`)

// TestLookupCarriesPolicy: the catalog's Lookup answers the cost, cache and
// approval rule a worker announced, and a version made of the build and
// the definition of the most recently started worker; a newer worker with
// another definition and settings changes both.
func TestLookupCarriesPolicy(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	reg := tools.NewRegistry()
	reg.MustRegister(policyTool("read_config", "Reads a configuration file."))
	announce(t, connect(t, srv.ClientURL()), "w1", reg)
	c := newCatalog(t, connect(t, srv.ClientURL()))
	ctx := t.Context()
	eventually(t, "read_config announced", func() bool { _, ok := c.Lookup(ctx, "read_config"); return ok })

	info, _ := c.Lookup(ctx, "read_config")
	rt, _ := reg.Lookup("read_config")
	if info.Cost != 5 || !reflect.DeepEqual(info.Cache, rt.Cache) || !reflect.DeepEqual(info.Approval, rt.Approval) {
		t.Errorf("Lookup = cost %d, cache %+v, approval %+v; want the tool's 5, %+v, %+v",
			info.Cost, info.Cache, info.Approval, rt.Cache, rt.Approval)
	}
	if !hex16.MatchString(info.Version) || info.Version != toolVersion(BuildVersion(), rt.Definition()) {
		t.Errorf("Version = %q, want 16 hex characters of the build and definition", info.Version)
	}
	if info.Cache == rt.Cache || info.Approval == rt.Approval {
		t.Error("the catalog's answer shares the registry's policy values")
	}
	if !info.Approval.Requires(json.RawMessage(`{"path":"/etc/passwd"}`)) || info.Approval.Requires(json.RawMessage(`{"path":"/tmp/x"}`)) {
		t.Error("the announced approval rule does not hold what the tool's did")
	}

	// A newer worker serves another definition, without a cache or an
	// approval rule: its settings and version count.
	time.Sleep(time.Millisecond) // a later StartedAt
	plain := tools.NewRegistry()
	pt := policyTool("read_config", "Reads a configuration file, faster.")
	pt.Cost, pt.Cache, pt.Approval = 0, nil, nil
	plain.MustRegister(pt)
	announce(t, connect(t, srv.ClientURL()), "w2", plain)
	eventually(t, "the newer worker's settings", func() bool {
		got, _ := c.Lookup(ctx, "read_config")
		return got.Cache == nil
	})
	got, _ := c.Lookup(ctx, "read_config")
	if got.Cost != 0 || got.Approval != nil || got.Version == info.Version || !hex16.MatchString(got.Version) {
		t.Errorf("after a newer worker: %+v; want no cost, no approval and another version than %s", got, info.Version)
	}
	if defs := c.Definitions(ctx); len(defs) != 1 || defs[0].Description != pt.Description {
		t.Errorf("Definitions = %+v; want the newer worker's", defs)
	}
}

// TestToolVersion: the version changes with the build, the description
// and the input schema, and only with them.
func TestToolVersion(t *testing.T) {
	t.Parallel()
	def := tools.Definition{Name: "search", Description: "Searches.", InputSchema: json.RawMessage(`{"type":"object"}`)}
	v := toolVersion("v1.2.3 abc", def)
	if !hex16.MatchString(v) || v != toolVersion("v1.2.3 abc", def) {
		t.Fatalf("toolVersion = %q, not 16 stable hex characters", v)
	}
	other := def
	other.Description = "Searches better."
	schema := def
	schema.InputSchema = json.RawMessage(`{"type":"object","properties":{}}`)
	shifted := tools.Definition{Name: "search", Description: "Searches.{", InputSchema: json.RawMessage(`"type":"object"}`)}
	for what, w := range map[string]string{
		"another build":             toolVersion("v1.2.4 abd", def),
		"another description":       toolVersion("v1.2.3 abc", other),
		"another schema":            toolVersion("v1.2.3 abc", schema),
		"another tool":              toolVersion("v1.2.3 abc", tools.Definition{Name: "fetch", Description: def.Description, InputSchema: def.InputSchema}),
		"a boundary moved":          toolVersion("v1.2.3 abc", shifted),
		"the build into the schema": toolVersion("", def),
	} {
		if w == v {
			t.Errorf("%s gives the same version %s", what, v)
		}
	}
}

// TestAnnouncedPolicyFailsSafe: an announcement written by hand (or by a
// broken worker) with a policy a registry refuses is applied safely: a
// cost out of range is brought into it, a bad cache or one on a tool
// neither idempotent nor read-only is dropped, and a bad approval rule
// holds every call.
func TestAnnouncedPolicyFailsSafe(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx := t.Context()
	kv, _, err := OpenBucket(ctx, connect(t, srv.ClientURL()), BucketConfig{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	for _, tc := range []struct {
		name string
		ann  Announcement
	}{
		{"negative_cost", Announcement{Cost: -3}},
		{"huge_cost", Announcement{Cost: 1 << 40}},
		{"cache_not_idempotent", Announcement{Cache: &tools.CachePolicy{TTL: time.Minute}}},
		{"cache_no_ttl", Announcement{Idempotent: true, Cache: &tools.CachePolicy{}}},
		{"cache_bad_scope", Announcement{Idempotent: true, Cache: &tools.CachePolicy{TTL: time.Minute, Scope: "world"}}},
		{"cache_read_only", Announcement{Hints: &tools.Hints{ReadOnly: &yes}, Cache: &tools.CachePolicy{TTL: time.Minute}}},
		{"approval_bad_glob", Announcement{Approval: &tools.ApprovalRule{When: []tools.ApprovalMatch{{Field: "input.path", Pattern: "/a/[b"}}}}},
		{"approval_long_timeout", Announcement{Approval: &tools.ApprovalRule{Timeout: 30 * 24 * time.Hour}}},
	} {
		a := tc.ann
		a.Tool = tools.Definition{Name: tc.name, InputSchema: json.RawMessage(`{"type":"object"}`)}
		a.WorkerID, a.StartedAt = "hand", time.Now().UTC()
		data, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, Key(tc.name, "hand"), data); err != nil {
			t.Fatal(err)
		}
	}
	c := newCatalog(t, connect(t, srv.ClientURL()))
	for _, tc := range []struct {
		name string
		want pooltype.ToolInfo
	}{
		{"negative_cost", pooltype.ToolInfo{}},
		{"huge_cost", pooltype.ToolInfo{Cost: tools.CostMax}},
		{"cache_not_idempotent", pooltype.ToolInfo{}},
		{"cache_no_ttl", pooltype.ToolInfo{}},
		{"cache_bad_scope", pooltype.ToolInfo{}},
		{"cache_read_only", pooltype.ToolInfo{Cache: &tools.CachePolicy{TTL: time.Minute}}},
		{"approval_bad_glob", pooltype.ToolInfo{Approval: &tools.ApprovalRule{}}},
		{"approval_long_timeout", pooltype.ToolInfo{Approval: &tools.ApprovalRule{Timeout: tools.ApprovalTimeoutMax}}},
	} {
		got, ok := c.Lookup(ctx, tc.name)
		if !ok {
			t.Errorf("%s: not served", tc.name)
			continue
		}
		if got.Cost != tc.want.Cost || !reflect.DeepEqual(got.Cache, tc.want.Cache) || !reflect.DeepEqual(got.Approval, tc.want.Approval) {
			t.Errorf("%s: cost %d, cache %+v, approval %+v; want %d, %+v, %+v",
				tc.name, got.Cost, got.Cache, got.Approval, tc.want.Cost, tc.want.Cache, tc.want.Approval)
		}
	}
}

// TestSubscribeHearsPolicyChange: a worker that announces another cost,
// cache or approval rule for a tool whose definition stays is a change
// the subscribers hear of.
func TestSubscribeHearsPolicyChange(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	reg := tools.NewRegistry()
	reg.MustRegister(policyTool("run", "Runs a command."))
	a := announce(t, connect(t, srv.ClientURL()), "w1", reg)
	c := newCatalog(t, connect(t, srv.ClientURL()))
	ctx := t.Context()
	eventually(t, "run announced", func() bool { _, ok := c.Lookup(ctx, "run"); return ok })
	changes, cancel := c.Subscribe()
	defer cancel()

	for _, edit := range []func(*tools.Registered){
		func(rt *tools.Registered) { rt.Cost = 6 },
		func(rt *tools.Registered) { rt.Cache = &tools.CachePolicy{TTL: time.Hour} },
		func(rt *tools.Registered) { rt.Approval = &tools.ApprovalRule{Timeout: time.Hour} },
	} {
		rt, _ := reg.Lookup("run")
		next := *rt
		edit(&next)
		if err := a.Update(ctx, &next); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changes:
		case <-time.After(waitLong):
			t.Fatalf("no change heard after an update to %+v", next.Tool)
		}
		eventually(t, "the update seen", func() bool {
			got, _ := c.Lookup(ctx, "run")
			return got.Cost == next.Cost && reflect.DeepEqual(got.Cache, next.Cache) && reflect.DeepEqual(got.Approval, next.Approval)
		})
		reg = tools.NewRegistry()
		reg.MustRegister(next.Tool)
	}
}

// TestRegistryCatalogPolicy: the in-process catalog answers a tool's cost,
// cache, approval rule and, for a cached tool, its version (the same the
// discovery catalog gives for this build), the same on every look-up.
func TestRegistryCatalogPolicy(t *testing.T) {
	t.Parallel()
	reg := tools.NewRegistry()
	reg.MustRegister(policyTool("read_config", "Reads a configuration file."))
	plain := policyTool("plain", "Plain.")
	plain.Cost, plain.Cache, plain.Approval = 0, nil, nil
	reg.MustRegister(plain)
	c := RegistryCatalog(reg)
	ctx := context.Background()
	rt, _ := reg.Lookup("read_config")
	info, ok := c.Lookup(ctx, "read_config")
	if !ok || info.Cost != 5 || info.Cache != rt.Cache || info.Approval != rt.Approval ||
		info.Version != toolVersion(BuildVersion(), rt.Definition()) {
		t.Errorf("Lookup(read_config) = %+v, %v", info, ok)
	}
	if again, _ := c.Lookup(ctx, "read_config"); again.Version != info.Version {
		t.Errorf("a second look-up gives version %s, the first %s", again.Version, info.Version)
	}
	if info, _ := c.Lookup(ctx, "plain"); info.Cost != 0 || info.Cache != nil || info.Approval != nil || info.Version != "" {
		t.Errorf("Lookup(plain) = %+v; want no policy and no version", info)
	}
}
