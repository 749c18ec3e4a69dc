package console

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// EnvTokens is the environment variable that holds operator tokens, as
// name=token pairs separated by commas, besides those of a tokens file.
const EnvTokens = "TOOLPOOL_UI_TOKENS"

// MinTokenBytes is the shortest operator token accepted.
const MinTokenBytes = 16

// Tokens are the operators' tokens: each names the operator who logs in
// with it (the name in the audit log). The zero value (or nil) has none.
type Tokens struct {
	byName map[string]string
}

// Len is how many tokens there are.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.byName)
}

// Names are the operators, sorted.
func (t *Tokens) Names() []string {
	if t == nil {
		return nil
	}
	out := make([]string, 0, len(t.byName))
	for n := range t.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Operator returns the operator whose token is token. It compares with
// every token in constant time.
func (t *Tokens) Operator(token string) (string, bool) {
	if t == nil || token == "" {
		return "", false
	}
	found := ""
	for name, tok := range t.byName {
		if subtle.ConstantTimeCompare([]byte(tok), []byte(token)) == 1 {
			found = name
		}
	}
	return found, found != ""
}

// add adds one operator's token.
func (t *Tokens) add(name, token, where string) error {
	name, token = strings.TrimSpace(name), strings.TrimSpace(token)
	switch {
	case name == "" || len(name) > 64 || strings.ContainsAny(name, " \t\r\n"):
		return fmt.Errorf("%s: operator name %q: want 1 to 64 characters without spaces", where, name)
	case len(token) < MinTokenBytes:
		return fmt.Errorf("%s: the token of operator %q is %d characters; an operator token needs at least %d (e.g. openssl rand -hex 32)", where, name, len(token), MinTokenBytes)
	}
	if t.byName == nil {
		t.byName = map[string]string{}
	}
	for other, tok := range t.byName {
		if tok == token && other != name {
			return fmt.Errorf("%s: operators %q and %q have the same token", where, other, name)
		}
	}
	t.byName[name] = token
	return nil
}

// ParseTokens reads a tokens file: a YAML (or JSON) mapping of operator
// names to tokens,
//
//	alice: 3f1c...   # at least MinTokenBytes characters
//	bob: 9a07...
func ParseTokens(data []byte, where string) (*Tokens, error) {
	var m map[string]string
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: want a mapping of operator names to tokens: %w", where, err)
	}
	t := &Tokens{}
	for name, tok := range m {
		if err := t.add(name, tok, where); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// LoadTokens reads the tokens of file (none when "") and of the
// environment variable EnvTokens (name=token,name=token), read with getenv
// (os.Getenv when nil).
func LoadTokens(file string, getenv func(string) string) (*Tokens, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	t := &Tokens{}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("operator tokens: %w", err)
		}
		if t, err = ParseTokens(data, file); err != nil {
			return nil, fmt.Errorf("operator tokens: %w", err)
		}
	}
	for _, pair := range strings.Split(getenv(EnvTokens), ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		name, tok, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, errors.New("operator tokens: " + EnvTokens + ": want name=token pairs separated by commas")
		}
		if err := t.add(name, tok, EnvTokens); err != nil {
			return nil, fmt.Errorf("operator tokens: %w", err)
		}
	}
	return t, nil
}
