package apikey

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
)

// Env is the environment variable that holds API keys, in the format of
// an API key file (YAML or JSON, see Parse).
const Env = "TOOLPOOL_API_KEYS"

// MinBytes is the shortest API key accepted: keys are bearer secrets,
// e.g. 32 random bytes in hex (openssl rand -hex 32).
const MinBytes = 16

// MaxWeight is the largest weight a tenant may have.
const MaxWeight = 1000

// MaxToolNameBytes caps a tool name a key lists: the longest a request
// may name (httpapi.MaxToolNameBytes).
const MaxToolNameBytes = 256

// entry is one entry of an API key file.
type entry struct {
	Tenant  string   `yaml:"tenant" json:"tenant"`
	Name    string   `yaml:"name" json:"name"`
	Key     string   `yaml:"key" json:"key"`
	SHA256  string   `yaml:"sha256" json:"sha256"`
	Tools   []string `yaml:"tools" json:"tools"`
	Metrics bool     `yaml:"metrics" json:"metrics"`
	// Weight, Priority and MaxPriority: see Key.
	Weight      *int   `yaml:"weight" json:"weight"`
	Priority    string `yaml:"priority" json:"priority"`
	MaxPriority string `yaml:"max_priority" json:"max_priority"`
}

// file is an API key file: {"keys": [entry, …]}, or the list alone.
type file struct {
	Keys []entry `yaml:"keys"`
}

// Parse reads API keys in YAML or JSON (JSON is YAML): a document
// {keys: [entry, …]} or the list of entries alone. An entry is
//
//	tenant: team-a            # required
//	name: ci-bot              # optional: the key's own name, unique (budgets on one key)
//	key: "…"                  # the secret, at least MinBytes; or
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
// that gives none takes the one another key of its tenant gives), and two
// keys with the same name.
func Parse(ks *Set, data []byte, source string) (*Set, error) {
	if ks == nil {
		ks = &Set{}
	}
	if ks.byHash == nil {
		ks.byHash = map[[sha256.Size]byte]*Key{}
	}
	entries, err := decode(data, source)
	if err != nil {
		return nil, err
	}
	for i, e := range entries {
		at := fmt.Sprintf("%s: keys[%d]", source, i)
		sum, err := e.secret(at)
		if err != nil {
			return nil, err
		}
		if _, dup := ks.byHash[sum]; dup {
			return nil, fmt.Errorf("%s: the same key is listed twice", at)
		}
		k, err := e.key(at)
		if err != nil {
			return nil, err
		}
		if err := ks.claimName(k); err != nil {
			return nil, err
		}
		k.seq = len(ks.byHash)
		ks.byHash[sum] = k
	}
	if err := ks.settleWeights(); err != nil {
		return nil, err
	}
	return ks, nil
}

// decode reads the entries of an API key file; at least one.
func decode(data []byte, source string) ([]entry, error) {
	var entries []entry
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
		var f file
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		entries = f.Keys
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: no API keys (want keys: [{tenant: …, key: …}, …])", source)
	}
	return entries, nil
}

// secret checks e's tenant and returns the SHA-256 of its secret, given
// as the key or as its hash; at names the entry in errors.
func (e *entry) secret(at string) (sum [sha256.Size]byte, err error) {
	if !validTenant(e.Tenant) {
		return sum, fmt.Errorf("%s.tenant: %q must be 1 to 64 letters, digits, '_', '-' or '.'", at, e.Tenant)
	}
	switch {
	case e.Key != "" && e.SHA256 != "":
		return sum, fmt.Errorf("%s: give key or sha256, not both", at)
	case e.Key != "":
		if len(e.Key) < MinBytes {
			return sum, fmt.Errorf("%s.key: is %d characters; an API key needs at least %d (e.g. openssl rand -hex 32)", at, len(e.Key), MinBytes)
		}
		if strings.TrimSpace(e.Key) != e.Key || strings.ContainsAny(e.Key, " \t\r\n") {
			return sum, fmt.Errorf("%s.key: must not contain spaces", at)
		}
		return sha256.Sum256([]byte(e.Key)), nil
	case e.SHA256 != "":
		b, err := hex.DecodeString(e.SHA256)
		if err != nil || len(b) != sha256.Size {
			return sum, fmt.Errorf("%s.sha256: want the 64 hex digits of the key's SHA-256 (printf %%s KEY | sha256sum)", at)
		}
		copy(sum[:], b)
		return sum, nil
	}
	return sum, fmt.Errorf("%s: needs key or sha256", at)
}

// key is the Key of e: its tenant, scheduling and tools.
func (e *entry) key(at string) (*Key, error) {
	k := &Key{Tenant: e.Tenant, Name: e.Name, Metrics: e.Metrics, Weight: 1, from: at}
	if e.Name != "" && !validTenant(e.Name) {
		return nil, fmt.Errorf("%s.name: %q must be 1 to 64 letters, digits, '_', '-' or '.'", at, e.Name)
	}
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
	return k, nil
}

// setScheduling reads the weight and priorities of entry e into k; at
// names the entry in errors.
func (k *Key) setScheduling(e *entry, at string) error {
	if e.Weight != nil {
		if *e.Weight < 1 || *e.Weight > MaxWeight {
			return fmt.Errorf("%s.weight: must be between 1 and %d, got %d", at, MaxWeight, *e.Weight)
		}
		k.Weight, k.weightSet = *e.Weight, true
	}
	var err error
	if k.Priority, err = ParsePriority(e.Priority); err != nil {
		return fmt.Errorf("%s.priority: %w", at, err)
	}
	k.MaxPriority = k.Priority
	if e.MaxPriority != "" {
		if k.MaxPriority, err = ParsePriority(e.MaxPriority); err != nil {
			return fmt.Errorf("%s.max_priority: %w", at, err)
		}
	}
	if k.Priority > k.MaxPriority {
		return fmt.Errorf("%s.priority: %s is above max_priority %s", at, k.Priority, k.MaxPriority)
	}
	return nil
}

// ParsePriority reads a priority of the key file or of a request: low,
// normal or high, in any case, spaces around ignored ("" is normal).
func ParsePriority(s string) (dispatch.Priority, error) {
	p, err := dispatch.ParsePriority(strings.ToLower(strings.TrimSpace(s)))
	if err != nil {
		return p, fmt.Errorf("%q is not a priority: want low, normal or high", s)
	}
	return p, nil
}

// Load reads the API keys of path (when not empty) and of the environment
// variable Env (when set), through getenv (os.Getenv when nil). It
// returns nil, and no error, when neither is given.
func Load(path string, getenv func(string) string) (*Set, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var ks *Set
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("API keys: %w", err)
		}
		if ks, err = Parse(nil, data, path); err != nil {
			return nil, fmt.Errorf("API keys: %w", err)
		}
	}
	if v := getenv(Env); strings.TrimSpace(v) != "" {
		var err error
		if ks, err = Parse(ks, []byte(v), Env); err != nil {
			return nil, fmt.Errorf("API keys: %w", err)
		}
	}
	return ks, nil
}

// validTenant reports whether s is a tenant name: 1 to 64 letters,
// digits, '_', '-' or '.'.
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
