package toolpool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/front/console"
)

// EnvAPIKeys is the environment variable LoadAPIKeys reads API keys
// from, in the format of an API key file.
const EnvAPIKeys = apikey.Env

// APIKeyMinBytes is the shortest API key (and /mcp bearer token)
// accepted: keys are bearer secrets, e.g. 32 random bytes in hex
// (openssl rand -hex 32).
const APIKeyMinBytes = apikey.MinBytes

// MaxWeight is the largest APIKey.Weight.
const MaxWeight = apikey.MaxWeight

// Priority orders a tool's waiting calls when it is saturated: a waiting
// call of a higher priority is published before any of a lower one. The
// zero value is the default, PriorityNormal.
type Priority string

// The priorities.
const (
	PriorityLow    Priority = "low"
	PriorityNormal Priority = "normal"
	PriorityHigh   Priority = "high"
)

// APIKey is one API key of the HTTP API (Orchestrator.Handler) and of
// /mcp: a request sends it as Authorization: Bearer <Key>, and its calls
// belong to the key's tenant. The field names are those of an API key
// file (ParseAPIKeys).
type APIKey struct {
	// Tenant names whose calls these are: it scopes deduplication and
	// sessions, labels the tenant's metrics and is the unit of fair
	// shares. 1 to 64 letters, digits, '_', '-' and '.'. Required.
	Tenant string `json:"tenant" yaml:"tenant"`
	// Name names the key itself, for a budget on this one key
	// (orchestrator budgets set --key NAME) and as who decided an approval
	// asked of an MCP host. Optional; unique among the keys; the rule of
	// Tenant.
	Name string `json:"name,omitempty" yaml:"name"`
	// Key is the secret, at least APIKeyMinBytes, without spaces. Give
	// Key or SHA256.
	Key string `json:"key,omitempty" yaml:"key"`
	// SHA256 is the key's SHA-256 in hex, in place of Key: the config (or
	// file) then holds no secret.
	SHA256 string `json:"sha256,omitempty" yaml:"sha256"`
	// Tools lists the tools the key may call and list. Default (nil): all
	// of them; an empty list: none.
	Tools []string `json:"tools" yaml:"tools"`
	// Metrics lets the key read GET /metrics of an HTTPServer on a
	// non-loopback address.
	Metrics bool `json:"metrics,omitempty" yaml:"metrics"`
	// Weight is the tenant's weight in fair shares: when a tool is
	// saturated, each of the tenant's fairness keys gets Weight turns to
	// every turn of a key of weight 1. 1 to MaxWeight; every key of a
	// tenant has the tenant's weight. Default 1 (or the weight another key
	// of the tenant gives).
	Weight int `json:"weight,omitempty" yaml:"weight"`
	// Priority is the priority of the key's calls when a request asks
	// for none. Default PriorityNormal.
	Priority Priority `json:"priority,omitempty" yaml:"priority"`
	// MaxPriority is the highest priority a request with this key may ask
	// for (header Toolpool-Priority). Default Priority: a request may
	// lower its calls' priority, not raise it.
	MaxPriority Priority `json:"max_priority,omitempty" yaml:"max_priority"`
}

// apiKeys builds the HTTP API's key set of keys, checked as an API key
// file is; source names them in errors. Nil for no keys.
func apiKeys(keys []APIKey, source string) (*apikey.Set, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	// Tools has no omitempty: an empty list (no tools) must not come
	// back as an absent one (all tools).
	data, err := json.Marshal(keys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return apikey.Parse(nil, data, source)
}

// ParseAPIKeys reads API keys in YAML or JSON: a document {keys: [entry,
// …]} or the list of entries alone, each entry an APIKey in the file's
// names:
//
//	tenant: team-a            # required
//	name: ci-bot              # optional: the key's own name, unique (budgets on one key)
//	key: "…"                  # the secret; or
//	sha256: "…"               # its SHA-256 in hex, so the file holds no secret
//	tools: [echo, read_file]  # optional: the tools it may call; absent: all
//	metrics: true             # optional: may read GET /metrics
//	weight: 3                 # optional: the tenant's weight in fair shares
//	priority: low             # optional: its calls' priority (low, normal, high)
//	max_priority: high        # optional: the highest a request may ask for
//
// The keys are checked as OrchestratorConfig.APIKeys are; source names
// the input in errors, with the entry and the field.
func ParseAPIKeys(data []byte, source string) ([]APIKey, error) {
	if _, err := apikey.Parse(nil, data, source); err != nil {
		return nil, err
	}
	return decodeAPIKeys(data, source)
}

// LoadAPIKeys reads the API keys of file (when not empty) and of the
// environment variable EnvAPIKeys (when set), through getenv (os.Getenv
// when nil), as ParseAPIKeys does. It returns none, and no error, when
// neither is given.
func LoadAPIKeys(file string, getenv func(string) string) ([]APIKey, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if _, err := apikey.Load(file, getenv); err != nil { // the checks, over both sources
		return nil, err
	}
	var keys []APIKey
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("API keys: %w", err)
		}
		if keys, err = decodeAPIKeys(data, file); err != nil {
			return nil, err
		}
	}
	if v := getenv(EnvAPIKeys); strings.TrimSpace(v) != "" {
		more, err := decodeAPIKeys([]byte(v), EnvAPIKeys)
		if err != nil {
			return nil, err
		}
		keys = append(keys, more...)
	}
	return keys, nil
}

// decodeAPIKeys decodes checked API keys: a list, or {keys: list}.
func decodeAPIKeys(data []byte, source string) ([]APIKey, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(bytes.TrimSpace(data), &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	var keys []APIKey
	if len(doc.Content) > 0 && doc.Content[0].Kind == yaml.SequenceNode {
		if err := doc.Content[0].Decode(&keys); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		return keys, nil
	}
	var f struct {
		Keys []APIKey `yaml:"keys"`
	}
	if err := doc.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return f.Keys, nil
}

// EnvOperatorTokens is the environment variable LoadOperatorTokens reads
// operator tokens from: name=token pairs separated by commas.
const EnvOperatorTokens = console.EnvTokens

// OperatorTokenMinBytes is the shortest operator token accepted.
const OperatorTokenMinBytes = console.MinTokenBytes

// LoadOperatorTokens reads the console's operator tokens
// (OrchestratorConfig.ConsoleTokens) of file (when not empty: a YAML
// mapping of operator names to tokens) and of the environment variable
// EnvOperatorTokens (name=token,name=token), through getenv (os.Getenv
// when nil). They are checked as the console checks them; none, and no
// error, when neither is given.
func LoadOperatorTokens(file string, getenv func(string) string) (map[string]string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if _, err := console.LoadTokens(file, getenv); err != nil {
		return nil, err
	}
	out := map[string]string{}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("operator tokens: %w", err)
		}
		var m map[string]string
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, fmt.Errorf("operator tokens: %s: %w", file, err)
		}
		for name, tok := range m {
			out[strings.TrimSpace(name)] = strings.TrimSpace(tok)
		}
	}
	for pair := range strings.SplitSeq(getenv(EnvOperatorTokens), ",") {
		if name, tok, ok := strings.Cut(pair, "="); ok {
			out[strings.TrimSpace(name)] = strings.TrimSpace(tok)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
