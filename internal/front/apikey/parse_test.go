package apikey

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
)

func TestParseKeys(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("hashed-0123456789abcdef"))
	yamlDoc := `# agents' keys
keys:
  - tenant: team-a
    key: plain-0123456789abcdef
  - tenant: team-b
    sha256: ` + hex.EncodeToString(sum[:]) + `
    tools: [echo, read_file, echo]
    metrics: true
`
	ks, err := Parse(nil, []byte(yamlDoc), "keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, ok := ks.Lookup("plain-0123456789abcdef")
	if !ok || a.Tenant != "team-a" || a.Tools != nil || a.Metrics || !a.Allows("anything") {
		t.Errorf("team-a: %+v %v", a, ok)
	}
	b, ok := ks.Lookup("hashed-0123456789abcdef")
	if !ok || b.Tenant != "team-b" || strings.Join(b.Tools, ",") != "echo,read_file" || !b.Metrics || b.Allows("sleep") {
		t.Errorf("team-b: %+v %v", b, ok)
	}
	if _, ok := ks.Lookup("plain-0123456789abcde"); ok {
		t.Error("a prefix of a key was accepted")
	}
	if got := strings.Join(ks.Tenants(), ","); got != "team-a,team-b" {
		t.Errorf("tenants %s", got)
	}
	// JSON, a bare list, an empty tool list (no tools).
	ks, err = Parse(nil, []byte(`[{"tenant":"j","key":"json-0123456789abcdef","tools":[]}]`), "env")
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := ks.Lookup("json-0123456789abcdef"); k == nil || k.Tools == nil || k.Allows("echo") {
		t.Errorf("an empty tool list: %+v", k)
	}
	bad := map[string]string{
		"empty":       ``,
		"no keys":     `keys: []`,
		"short key":   `[{tenant: a, key: short}]`,
		"no tenant":   `[{key: plain-0123456789abcdef}]`,
		"bad tenant":  `[{tenant: "a b", key: plain-0123456789abcdef}]`,
		"both":        `[{tenant: a, key: plain-0123456789abcdef, sha256: ` + hex.EncodeToString(sum[:]) + `}]`,
		"neither":     `[{tenant: a}]`,
		"bad sha256":  `[{tenant: a, sha256: abc}]`,
		"duplicate":   `[{tenant: a, key: plain-0123456789abcdef}, {tenant: b, key: plain-0123456789abcdef}]`,
		"misspelt":    `[{tenant: a, key: plain-0123456789abcdef, tool: [echo]}]`,
		"unknown top": `{keys: [{tenant: a, key: plain-0123456789abcdef}], extra: 1}`,
	}
	for name, doc := range bad {
		if _, err := Parse(nil, []byte(doc), "f"); err == nil {
			t.Errorf("%s: accepted %q", name, doc)
		}
	}
}

func TestLoadKeysFromFileAndEnvironment(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(p, []byte(`{"keys":[{"tenant":"file","key":"file-0123456789abcdef"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{Env: `[{tenant: env, key: env-0123456789abcdef, tools: [echo]}]`}
	ks, err := Load(p, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if ks.Len() != 2 {
		t.Fatalf("%d keys", ks.Len())
	}
	if k, ok := ks.Lookup("env-0123456789abcdef"); !ok || k.Tenant != "env" {
		t.Errorf("env key: %+v", k)
	}
	if ks, err := Load("", func(string) string { return "" }); err != nil || ks != nil {
		t.Errorf("no keys: %v %v", ks, err)
	}
	env[Env] = `[{tenant: env, key: file-0123456789abcdef}]`
	if _, err := Load(p, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a key in both: %v", err)
	}
}

func TestParseKeysWeightsAndPriorities(t *testing.T) {
	t.Parallel()
	ks, err := Parse(nil, []byte(`keys:
  - {tenant: big, key: big-1-0123456789abcdef, weight: 3}
  - {tenant: big, key: big-2-0123456789abcdef, priority: high}
  - {tenant: batch, key: batch-0123456789abcdef, priority: low, max_priority: normal}
  - {tenant: plain, key: plain-0123456789abcdef}
  - {tenant: ops, key: ops-0123456789abcdef, max_priority: HIGH}
`), "keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]Key{
		// A key that gives no weight takes its tenant's.
		"big-1-0123456789abcdef": {Tenant: "big", Weight: 3, Priority: dispatch.PriorityNormal, MaxPriority: dispatch.PriorityNormal},
		"big-2-0123456789abcdef": {Tenant: "big", Weight: 3, Priority: dispatch.PriorityHigh, MaxPriority: dispatch.PriorityHigh},
		"batch-0123456789abcdef": {Tenant: "batch", Weight: 1, Priority: dispatch.PriorityLow, MaxPriority: dispatch.PriorityNormal},
		"plain-0123456789abcdef": {Tenant: "plain", Weight: 1, Priority: dispatch.PriorityNormal, MaxPriority: dispatch.PriorityNormal},
		"ops-0123456789abcdef":   {Tenant: "ops", Weight: 1, Priority: dispatch.PriorityNormal, MaxPriority: dispatch.PriorityHigh},
	} {
		k, ok := ks.Lookup(token)
		if !ok || k.Tenant != want.Tenant || k.Weight != want.Weight || k.Priority != want.Priority || k.MaxPriority != want.MaxPriority {
			t.Errorf("%s: %+v, want %+v", token, k, want)
		}
	}
	if ks.Weight("big") != 3 || ks.Weight("plain") != 1 || ks.Weight("nobody") != 1 {
		t.Errorf("weights: big %d, plain %d, nobody %d", ks.Weight("big"), ks.Weight("plain"), ks.Weight("nobody"))
	}

	for doc, want := range map[string]string{
		`[{tenant: a, key: a-0123456789abcdef, weight: 0}]`:                                                                                        `keys.yaml: keys[0].weight: must be between 1 and 1000, got 0`,
		`[{tenant: a, key: a-0123456789abcdef, weight: -2}]`:                                                                                       `keys.yaml: keys[0].weight: must be between 1 and 1000, got -2`,
		`[{tenant: a, key: a-0123456789abcdef, weight: heavy}]`:                                                                                    `keys.yaml: `,
		`[{tenant: a, key: a-0123456789abcdef, priority: urgent}]`:                                                                                 `keys.yaml: keys[0].priority: "urgent" is not a priority: want low, normal or high`,
		`[{tenant: a, key: a-0123456789abcdef, max_priority: top}]`:                                                                                `keys.yaml: keys[0].max_priority: "top" is not a priority: want low, normal or high`,
		`[{tenant: a, key: a-0123456789abcdef, priority: high, max_priority: normal}]`:                                                             `keys.yaml: keys[0].priority: high is above max_priority normal`,
		`[{tenant: a, key: a-0123456789abcdef, weight: 2}, {tenant: b, key: b-0123456789abcdef}, {tenant: a, key: c-0123456789abcdef, weight: 5}]`: `keys.yaml: keys[2].weight: 5, but keys.yaml: keys[0] gives tenant "a" weight 2; a tenant has one weight, give its keys the same`,
	} {
		if _, err := Parse(nil, []byte(doc), "keys.yaml"); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", doc, err, want)
		}
	}

	// The weights of a file and of the environment belong together.
	file, err := Parse(nil, []byte(`[{tenant: a, key: a-0123456789abcdef, weight: 2}]`), "keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(file, []byte(`[{tenant: a, key: e-0123456789abcdef, weight: 4}]`), Env)
	if want := `TOOLPOOL_API_KEYS: keys[0].weight: 4, but keys.yaml: keys[0] gives tenant "a" weight 2`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("file and environment: %v, want %s", err, want)
	}
}

func TestParseKeyNames(t *testing.T) {
	t.Parallel()
	ks, err := Parse(nil, []byte(`keys:
  - {tenant: team-a, name: ci-bot, key: ci-0123456789abcdef}
  - {tenant: team-a, key: plain-0123456789abcdef}
  - {tenant: team-b, key: other-0123456789abcdef}
`), "keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := ks.Lookup("ci-0123456789abcdef"); k == nil || k.Name != "ci-bot" || k.Tenant != "team-a" {
		t.Errorf("named key: %+v", k)
	}
	if k, _ := ks.Lookup("plain-0123456789abcdef"); k == nil || k.Name != "" {
		t.Errorf("a key without a name: %+v", k)
	}
	for doc, want := range map[string]string{
		`[{tenant: a, name: "ci bot", key: a-0123456789abcdef}]`:                                                                               `keys.yaml: keys[0].name: "ci bot" must be 1 to 64 letters, digits, '_', '-' or '.'`,
		`[{tenant: a, name: "` + strings.Repeat("n", 65) + `", key: a-0123456789abcdef}]`:                                                      `keys.yaml: keys[0].name: "nnnn`,
		`[{tenant: a, name: x, key: a-0123456789abcdef}, {tenant: b, key: b-0123456789abcdef}, {tenant: b, name: x, key: c-0123456789abcdef}]`: `keys.yaml: keys[2].name: "x" is the name of keys.yaml: keys[0] too; a key's name names one key`,
		`[{tenant: a, names: x, key: a-0123456789abcdef}]`:                                                                                     `keys.yaml: `,
	} {
		if _, err := Parse(nil, []byte(doc), "keys.yaml"); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s", doc, err, want)
		}
	}
	// A name given in the file and again in the environment.
	file, err := Parse(nil, []byte(`[{tenant: a, name: bot, key: a-0123456789abcdef}]`), "keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(file, []byte(`[{tenant: b, name: bot, key: e-0123456789abcdef}]`), Env)
	if want := `TOOLPOOL_API_KEYS: keys[0].name: "bot" is the name of keys.yaml: keys[0] too`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("file and environment: %v, want %s", err, want)
	}
}
