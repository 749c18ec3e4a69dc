package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
)

// EnvAPIKeys is the environment variable that holds API keys, in the
// format of an API key file (YAML or JSON, see ParseKeys).
const EnvAPIKeys = "TOOLPOOL_API_KEYS"

// MinKeyBytes is the shortest API key accepted: keys are bearer secrets,
// e.g. 32 random bytes in hex (openssl rand -hex 32).
const MinKeyBytes = 16

// Key is one API key: the tenant it names and what it may do. The secret
// itself is not kept, only its SHA-256.
type Key struct {
	// Tenant names whose calls these are: it scopes deduplication and
	// sessions, and labels the tenant's metrics. Letters, digits, '_', '-'
	// and '.', at most 64.
	Tenant string
	// Tools lists the tools the key may call and list; nil: all of them.
	Tools []string
	// Metrics allows GET /metrics where it needs a key (see Gate).
	Metrics bool
	// Weight is the tenant's weight in fair shares (dispatch.WithWeight):
	// when a tool is saturated, each of the tenant's fairness keys gets
	// Weight turns to every turn of a key of weight 1. At least 1; every
	// key of a tenant has the tenant's weight (default 1).
	Weight int
	// Priority is the priority of the key's calls when a request asks for
	// none (dispatch.WithPriority). Default dispatch.PriorityNormal.
	Priority dispatch.Priority
	// MaxPriority is the highest priority a request with this key may ask
	// for (header Toolpool-Priority or ?priority=). Default Priority: a
	// request may lower its calls' priority, not raise it.
	MaxPriority dispatch.Priority

	from      string // where the key is defined, for errors: "keys.yaml: keys[2]"
	seq       int    // the order keys were read in
	weightSet bool   // the entry gives the weight
}

// Allows reports whether k may call tool.
func (k *Key) Allows(tool string) bool {
	return k.Tools == nil || slices.Contains(k.Tools, tool)
}

// Keys is a set of API keys, looked up by the SHA-256 of the bearer token:
// a map lookup by hash takes the same time whatever prefix of a key a
// guess shares, unlike comparing the keys themselves. The zero value and
// nil hold no key. It is safe for concurrent use once built.
type Keys struct {
	byHash map[[sha256.Size]byte]*Key
}

// Len is the number of keys.
func (ks *Keys) Len() int {
	if ks == nil {
		return 0
	}
	return len(ks.byHash)
}

// Lookup returns the key whose secret is token.
func (ks *Keys) Lookup(token string) (*Key, bool) {
	if ks == nil || token == "" {
		return nil, false
	}
	k, ok := ks.byHash[sha256.Sum256([]byte(token))]
	return k, ok
}

// Tenants lists the tenants the keys name, sorted, each once.
func (ks *Keys) Tenants() []string {
	if ks == nil {
		return nil
	}
	var out []string
	for _, k := range ks.byHash {
		out = append(out, k.Tenant)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// keyEntry is one entry of an API key file.
type keyEntry struct {
	Tenant  string   `yaml:"tenant" json:"tenant"`
	Key     string   `yaml:"key" json:"key"`
	SHA256  string   `yaml:"sha256" json:"sha256"`
	Tools   []string `yaml:"tools" json:"tools"`
	Metrics bool     `yaml:"metrics" json:"metrics"`
	// Weight, Priority and MaxPriority: see Key.
	Weight      *int   `yaml:"weight" json:"weight"`
	Priority    string `yaml:"priority" json:"priority"`
	MaxPriority string `yaml:"max_priority" json:"max_priority"`
}

// keyFile is an API key file: {"keys": [entry, …]}, or the list alone.
type keyFile struct {
	Keys []keyEntry `yaml:"keys"`
}

// ParseKeys reads API keys in YAML or JSON (JSON is YAML): a document
// {keys: [entry, …]} or the list of entries alone. An entry is
//
//	tenant: team-a            # required
//	key: "…"                  # the secret, at least MinKeyBytes; or
//	sha256: "…"               # its SHA-256 in hex, so the file holds no secret
//	tools: [echo, read_file]  # optional: the tools it may call; absent: all
//	metrics: true             # optional: may read GET /metrics
//	weight: 3                 # optional: the tenant's weight in fair shares, at least 1; default 1
//	priority: low             # optional: its calls' priority (low, normal, high); default normal
//	max_priority: high        # optional: the highest a request may ask for; default priority
//
// source names the input in errors. Keys are merged into ks (a new set
// when ks is nil); the same key twice is an error, and so are two keys of
// one tenant with different weights (a weight belongs to the tenant: a key
// that gives none takes the one another key of its tenant gives).
func ParseKeys(ks *Keys, data []byte, source string) (*Keys, error) {
	if ks == nil {
		ks = &Keys{}
	}
	if ks.byHash == nil {
		ks.byHash = map[[sha256.Size]byte]*Key{}
	}
	var entries []keyEntry
	trimmed := bytes.TrimSpace(data)
	var doc yaml.Node
	if err := yaml.Unmarshal(trimmed, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(trimmed) == 0 || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: no API keys", source)
	}
	dec := yaml.NewDecoder(bytes.NewReader(trimmed))
	dec.KnownFields(true) // a misspelt "tools" must not mean all tools
	if doc.Content[0].Kind == yaml.SequenceNode {
		if err := dec.Decode(&entries); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
	} else {
		var f keyFile
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		entries = f.Keys
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: no API keys (want keys: [{tenant: …, key: …}, …])", source)
	}
	for i, e := range entries {
		at := fmt.Sprintf("%s: keys[%d]", source, i)
		if !validTenant(e.Tenant) {
			return nil, fmt.Errorf("%s.tenant: %q must be 1 to 64 letters, digits, '_', '-' or '.'", at, e.Tenant)
		}
		var sum [sha256.Size]byte
		switch {
		case e.Key != "" && e.SHA256 != "":
			return nil, fmt.Errorf("%s: give key or sha256, not both", at)
		case e.Key != "":
			if len(e.Key) < MinKeyBytes {
				return nil, fmt.Errorf("%s.key: is %d characters; an API key needs at least %d (e.g. openssl rand -hex 32)", at, len(e.Key), MinKeyBytes)
			}
			if strings.TrimSpace(e.Key) != e.Key || strings.ContainsAny(e.Key, " \t\r\n") {
				return nil, fmt.Errorf("%s.key: must not contain spaces", at)
			}
			sum = sha256.Sum256([]byte(e.Key))
		case e.SHA256 != "":
			b, err := hex.DecodeString(e.SHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("%s.sha256: want the 64 hex digits of the key's SHA-256 (printf %%s KEY | sha256sum)", at)
			}
			copy(sum[:], b)
		default:
			return nil, fmt.Errorf("%s: needs key or sha256", at)
		}
		if _, dup := ks.byHash[sum]; dup {
			return nil, fmt.Errorf("%s: the same key is listed twice", at)
		}
		k := &Key{Tenant: e.Tenant, Metrics: e.Metrics, Weight: 1, from: at, seq: len(ks.byHash)}
		if err := k.setScheduling(e, at); err != nil {
			return nil, err
		}
		if e.Tools != nil {
			k.Tools = []string{}
			for j, name := range e.Tools {
				if name == "" || len(name) > MaxToolNameBytes {
					return nil, fmt.Errorf("%s.tools[%d]: %q is not a tool name", at, j, name)
				}
				k.Tools = append(k.Tools, name)
			}
			slices.Sort(k.Tools)
			k.Tools = slices.Compact(k.Tools)
		}
		ks.byHash[sum] = k
	}
	if err := ks.settleWeights(); err != nil {
		return nil, err
	}
	return ks, nil
}

// setScheduling reads the weight and priorities of entry e into k; at
// names the entry in errors.
func (k *Key) setScheduling(e keyEntry, at string) error {
	if e.Weight != nil {
		if *e.Weight < 1 || *e.Weight > MaxWeight {
			return fmt.Errorf("%s.weight: must be between 1 and %d, got %d", at, MaxWeight, *e.Weight)
		}
		k.Weight, k.weightSet = *e.Weight, true
	}
	var err error
	if k.Priority, err = parsePriority(e.Priority); err != nil {
		return fmt.Errorf("%s.priority: %w", at, err)
	}
	k.MaxPriority = k.Priority
	if e.MaxPriority != "" {
		if k.MaxPriority, err = parsePriority(e.MaxPriority); err != nil {
			return fmt.Errorf("%s.max_priority: %w", at, err)
		}
	}
	if k.Priority > k.MaxPriority {
		return fmt.Errorf("%s.priority: %s is above max_priority %s", at, k.Priority, k.MaxPriority)
	}
	return nil
}

// settleWeights gives every key its tenant's weight: the one its keys
// give (two different ones are an error naming both keys), else 1.
func (ks *Keys) settleWeights() error {
	byTenant := map[string]*Key{} // tenant → a key that gives its weight
	keys := slices.SortedFunc(maps.Values(ks.byHash), func(a, b *Key) int { return a.seq - b.seq })
	for _, k := range keys {
		if !k.weightSet {
			continue
		}
		if first, ok := byTenant[k.Tenant]; ok && first.Weight != k.Weight {
			return fmt.Errorf("%s.weight: %d, but %s gives tenant %q weight %d; a tenant has one weight, give its keys the same",
				k.from, k.Weight, first.from, k.Tenant, first.Weight)
		}
		byTenant[k.Tenant] = k
	}
	for _, k := range keys {
		if first, ok := byTenant[k.Tenant]; ok {
			k.Weight = first.Weight
		}
	}
	return nil
}

// MaxWeight is the largest weight a tenant may have.
const MaxWeight = 1000

// parsePriority reads a priority of the key file or a request: low,
// normal or high, in any case.
func parsePriority(s string) (dispatch.Priority, error) {
	p, err := dispatch.ParsePriority(strings.ToLower(strings.TrimSpace(s)))
	if err != nil {
		return p, fmt.Errorf("%q is not a priority: want low, normal or high", s)
	}
	return p, nil
}

// Weight is the weight of tenant in fair shares, as its keys give it: 1
// for a tenant no key names.
func (ks *Keys) Weight(tenant string) int {
	if ks != nil {
		for _, k := range ks.byHash {
			if k.Tenant == tenant {
				return k.Weight
			}
		}
	}
	return 1
}

// LoadKeys reads the API keys of file (when not empty) and of the
// environment variable EnvAPIKeys (when set), through getenv (os.Getenv
// when nil). It returns nil, and no error, when neither is given.
func LoadKeys(file string, getenv func(string) string) (*Keys, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var ks *Keys
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("API keys: %w", err)
		}
		if ks, err = ParseKeys(nil, data, file); err != nil {
			return nil, fmt.Errorf("API keys: %w", err)
		}
	}
	if v := getenv(EnvAPIKeys); strings.TrimSpace(v) != "" {
		var err error
		if ks, err = ParseKeys(ks, []byte(v), EnvAPIKeys); err != nil {
			return nil, fmt.Errorf("API keys: %w", err)
		}
	}
	return ks, nil
}

func validTenant(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '_', b == '-', b == '.':
		default:
			return false
		}
	}
	return true
}

// errNoKey and errBadKey are the two ways a request fails authentication.
var (
	errNoKey  = errors.New("this API needs an API key: send Authorization: Bearer <key>")
	errBadKey = errors.New("the API key is not valid")
)

// authenticate returns the key of r's bearer token.
func (ks *Keys) authenticate(r *http.Request) (*Key, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, errNoKey
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, errors.New("the Authorization header must be Bearer <key>")
	}
	k, ok := ks.Lookup(strings.TrimSpace(token))
	if !ok {
		return nil, errBadKey
	}
	return k, nil
}

type keyCtx struct{}

// withKey returns ctx carrying the key a request authenticated with.
func withKey(ctx context.Context, k *Key) context.Context {
	return context.WithValue(ctx, keyCtx{}, k)
}

// KeyFrom returns the API key the request of ctx authenticated with, if
// any.
func KeyFrom(ctx context.Context) (*Key, bool) {
	k, ok := ctx.Value(keyCtx{}).(*Key)
	return k, ok && k != nil
}
