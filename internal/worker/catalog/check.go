package catalog

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/tools"
)

// Bounds the checks enforce.
const (
	// TimeoutMax is the longest per-attempt timeout a catalog may give.
	TimeoutMax = 24 * time.Hour
	// MaxOutputBytesMax is the largest max_output_bytes a catalog may give.
	MaxOutputBytesMax = 8 << 20
	// TermGraceMax is the longest term_grace a catalog may give.
	TermGraceMax = time.Minute
)

// envNameRE is the grammar of an environment variable's name.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// registerField maps an error of tools.Registry.Register to the catalog
// field it is about (the Tool's fields are named as the catalog names them)
// and the reason.
func registerField(err error) (field, msg string) {
	var re *tools.RegisterError
	switch {
	case errors.Is(err, tools.ErrDuplicateTool):
		return "name", "is already registered (by another catalog entry, a demo tool or a built-in tool)"
	case errors.As(err, &re):
		return re.Field, re.Reason
	}
	return "", err.Error()
}

// checkPerKey checks the per_key limits field by field: each number given
// at least 1 (leaving it out sets no limit), per a positive duration, and
// per and burst only with rate. It returns the limits as given (the
// registry fills per and burst in) and the field at fault, "" for the
// mapping as a whole.
func checkPerKey(s *perKeySpec) (tools.KeyLimits, string, error) {
	var l tools.KeyLimits
	for _, n := range []struct {
		field string
		value *int
		dst   *int
		none  string
	}{
		{"concurrency", s.Concurrency, &l.Concurrency, "no cap"},
		{"rate", s.Rate, &l.Rate, "no rate limit"},
		{"burst", s.Burst, &l.Burst, "a burst of rate"},
	} {
		if n.value == nil {
			continue
		}
		if *n.value < 1 {
			return l, n.field, fmt.Errorf("must be at least 1, got %d (leave it out for %s)", *n.value, n.none)
		}
		*n.dst = *n.value
	}
	if s.Per != nil {
		d, err := parseDuration(*s.Per)
		switch {
		case err != nil:
			return l, "per", err
		case d <= 0:
			return l, "per", fmt.Errorf("must be positive, got %s", *s.Per)
		}
		l.Per = d
	}
	switch {
	case l.Rate == 0 && l.Per > 0:
		return l, "per", errors.New("is the period of rate, which is not set: give rate too (calls per period)")
	case l.Rate == 0 && l.Burst > 0:
		return l, "burst", errors.New("is the burst of rate, which is not set: give rate too")
	case l.IsZero():
		return l, "", errors.New("sets no limit: give concurrency (calls of one key at once) or rate (calls of one key per period), or leave per_key out")
	}
	return l, "", nil
}

// parseDuration reads a Go duration ("10s", "1m30s") with a message a
// person can act on.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("must be a duration such as 500ms, 10s or 1m30s, not %q", s)
	}
	return d, nil
}

// checkRetry checks the retry settings one by one, so the error names the
// field, and then as a whole with classify's defaults applied, as
// tools.Registry.Register will. For a builtin entry (overlay) the settings
// left out are the built-in tool's, unknown here: only the settings given
// are checked against each other, and Apply checks the rest.
func checkRetry(r *retrySpec, overlay bool) (classify.Policy, string, error) {
	var pol classify.Policy
	if r.MaxAttempts != nil {
		if n := *r.MaxAttempts; n < 1 || n > classify.MaxAttemptsLimit {
			return pol, "max_attempts", fmt.Errorf("must be between 1 and %d, got %d", classify.MaxAttemptsLimit, n)
		}
		pol.MaxAttempts = *r.MaxAttempts
	}
	for _, d := range []struct {
		field string
		value *string
		dst   *time.Duration
	}{{"base_delay", r.BaseDelay, &pol.BaseDelay}, {"max_delay", r.MaxDelay, &pol.MaxDelay}} {
		if d.value == nil {
			continue
		}
		v, err := parseDuration(*d.value)
		if err != nil {
			return pol, d.field, err
		}
		if v <= 0 {
			return pol, d.field, fmt.Errorf("must be positive, got %s", *d.value)
		}
		*d.dst = v
	}
	if r.Jitter != nil {
		if j := *r.Jitter; math.IsNaN(j) || j < 0 || j > 1 {
			return pol, "jitter", fmt.Errorf("must be between 0 and 1 (a fraction of the delay), got %v", j)
		}
		pol.Jitter = *r.Jitter
	}
	if overlay {
		if pol.BaseDelay > 0 && pol.MaxDelay > 0 && pol.MaxDelay < pol.BaseDelay {
			return pol, "max_delay", fmt.Errorf("must be at least base_delay (%s)", pol.BaseDelay)
		}
		return pol, "", nil
	}
	full := pol.WithDefaults()
	if full.MaxDelay < full.BaseDelay {
		if pol.MaxDelay == 0 {
			return pol, "base_delay", fmt.Errorf("must be at most max_delay (%s by default); set retry.max_delay too", full.MaxDelay)
		}
		return pol, "max_delay", fmt.Errorf("must be at least base_delay (%s)", full.BaseDelay)
	}
	if err := full.Validate(); err != nil {
		return pol, "", err
	}
	return pol, "", nil
}

// expandEnv resolves ${NAME} references in s. It returns the values it put
// in (secrets, never to be shown) and an error naming a variable that is
// unset or empty — never its value.
func expandEnv(s string, lookup func(string) (string, bool)) (string, []string, error) {
	var b strings.Builder
	var secrets []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), secrets, nil
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", nil, errors.New(`has a "${" without its closing "}"`)
		}
		name := s[i+2 : i+end]
		if !envNameRE.MatchString(name) {
			return "", nil, fmt.Errorf("refers to ${%s}, which is not a valid environment variable name", name)
		}
		v, ok := lookup(name)
		switch {
		case !ok:
			return "", nil, fmt.Errorf("refers to environment variable %s, which is not set", name)
		case v == "":
			return "", nil, fmt.Errorf("refers to environment variable %s, which is empty", name)
		}
		b.WriteString(v)
		secrets = append(secrets, v)
		s = s[i+end+1:]
	}
}
