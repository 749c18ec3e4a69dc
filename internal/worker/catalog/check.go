package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolpool/toolpool/internal/infra/subject"
	"github.com/toolpool/toolpool/pkg/classify"
	"github.com/toolpool/toolpool/pkg/envelope"
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

// reservedHeaders are set by the webhook backend itself.
var reservedHeaders = []string{
	"Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection",
	http.CanonicalHeaderKey(envelope.HeaderTraceparent), HeaderCallID, HeaderAttempt, HeaderTool,
}

var (
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// entry checks tool i of the file and returns its Entry.
func (p *parser) entry(i int, s *toolSpec) (*Entry, error) {
	item := p.items[i]
	tool := p.toolLabel(i)
	at := func(path string) int {
		if k, _ := findPath(item, strings.Split(path, "[")[0]); k != nil { // a list's item: the list's line
			return k.Line
		}
		return item.Line
	}
	bad := func(field, format string, args ...any) error {
		return p.failf(at(field), tool, field, format, args...)
	}

	e := &Entry{Name: s.Name, Line: item.Line}
	switch {
	case s.Name == "":
		return nil, bad("name", "is required")
	case !envelope.ValidToolName(s.Name):
		return nil, bad("name", "must be %s (%s), as the Messages API requires", subject.TokenChars, tools.NamePattern)
	}

	switch Backend(s.Backend) {
	case BackendWebhook, BackendExec, BackendBuiltin, BackendMCP:
		e.Backend = Backend(s.Backend)
	case "":
		return nil, bad("backend", "is required: one of webhook, exec, builtin, mcp")
	default:
		return nil, bad("backend", "must be one of webhook, exec, builtin, mcp, not %q", s.Backend)
	}
	builtin := e.Backend == BackendBuiltin
	mcp := e.Backend == BackendMCP
	present := map[Backend]bool{BackendWebhook: s.Webhook != nil, BackendExec: s.Exec != nil, BackendMCP: s.MCP != nil}
	if !builtin && !present[e.Backend] {
		return nil, bad("backend", "is %s, but the entry has no %s settings", e.Backend, e.Backend)
	}
	for _, other := range []Backend{BackendWebhook, BackendExec, BackendMCP} {
		if other != e.Backend && present[other] {
			return nil, bad(string(other), "is not allowed with backend %s", e.Backend)
		}
	}

	if mcp {
		if field := mcpServerField(s); field != "" {
			return nil, bad(field, "is not allowed with backend mcp: each tool of the server keeps its own")
		}
	}
	if s.Description != nil {
		e.Description = strings.TrimSpace(*s.Description)
		if e.Description == "" {
			return nil, bad("description", "is empty; tell the model what the tool does and when to use it")
		}
	} else if !builtin && !mcp {
		return nil, bad("description", "is required: the model reads it to decide when to call the tool")
	}

	hasSchema := s.InputSchema.Kind != 0
	switch {
	case builtin && hasSchema:
		return nil, bad("input_schema", "is not allowed with backend builtin: a built-in tool keeps its own schema")
	case !builtin && !mcp && !hasSchema:
		return nil, bad("input_schema", `is required: a JSON Schema object such as {type: object, properties: {…}}`)
	case hasSchema:
		if s.InputSchema.Kind != yaml.MappingNode {
			return nil, bad("input_schema", "must be a mapping (a JSON Schema object)")
		}
		schema, err := nodeJSON(&s.InputSchema)
		if err != nil {
			return nil, bad("input_schema", "%v", err)
		}
		e.InputSchema = schema
	}

	if s.Timeout != nil {
		d, err := parseDuration(*s.Timeout)
		switch {
		case err != nil:
			return nil, bad("timeout", "%v", err)
		case d <= 0:
			return nil, bad("timeout", "must be positive, got %s", *s.Timeout)
		case d > TimeoutMax:
			return nil, bad("timeout", "must be at most %s, got %s", TimeoutMax, *s.Timeout)
		}
		e.Timeout = d
	}

	if s.Retry != nil {
		pol, field, err := checkRetry(s.Retry, builtin)
		if err != nil {
			return nil, bad("retry."+field, "%v", err)
		}
		e.Retry = pol
	}

	if s.Hints != nil {
		e.Hints = tools.Hints{ReadOnly: s.Hints.ReadOnly, Destructive: s.Hints.Destructive, OpenWorld: s.Hints.OpenWorld}
	}

	if s.Idempotent != nil {
		if builtin {
			return nil, bad("idempotent", "is not allowed with backend builtin: a built-in tool's code decides it")
		}
		e.Idempotent = *s.Idempotent
	}

	if s.Concurrency != nil {
		if *s.Concurrency < 1 {
			return nil, bad("concurrency", "must be at least 1, got %d", *s.Concurrency)
		}
		e.Concurrency = *s.Concurrency
	}

	if s.PauseAbove != nil {
		d, err := parseDuration(*s.PauseAbove)
		switch {
		case err != nil:
			return nil, bad("pause_on_rate_limit_above", "%v", err)
		case d <= 0:
			return nil, bad("pause_on_rate_limit_above", "must be positive, got %s (leave it out to never pause)", *s.PauseAbove)
		}
		e.PauseOn429Above = d
	}

	if s.Fairness != nil {
		if reason := tools.CheckFairness(*s.Fairness); reason != "" || *s.Fairness == "" {
			if reason == "" {
				reason = "is empty; leave it out to share between tenants"
			}
			return nil, bad("fairness", "%s", reason)
		}
		e.Fairness = *s.Fairness
	}

	if s.PerKey != nil {
		l, field, err := checkPerKey(s.PerKey)
		if err != nil {
			if field != "" {
				field = "." + field
			}
			return nil, bad("per_key"+field, "%v", err)
		}
		e.PerKey = l
	}

	switch e.Backend {
	case BackendWebhook:
		wh, field, err := p.checkWebhook(s.Webhook)
		if err != nil {
			return nil, bad("webhook."+field, "%v", err)
		}
		e.Webhook = wh
	case BackendExec:
		ex, field, err := p.checkExec(s.Exec)
		if err != nil {
			return nil, bad("exec."+field, "%v", err)
		}
		e.Exec = ex
	case BackendMCP:
		m, field, err := p.checkMCP(s.MCP)
		if err != nil {
			if field == "" {
				return nil, bad("mcp", "%v", err)
			}
			return nil, bad("mcp."+field, "%v", err)
		}
		m.idempotent = s.Idempotent
		e.MCP = m
	}

	if !builtin && !mcp {
		// Register's own checks (schema compiles, root type object, …) on a
		// scratch registry: whatever it refuses now would stop the worker.
		t, err := e.tool(p.opts)
		if err == nil {
			err = tools.NewRegistry().Register(t)
		}
		if err != nil {
			field, msg := registerField(err)
			return nil, bad(field, "%s", msg)
		}
	}
	return e, nil
}

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

func (p *parser) checkWebhook(s *webhookSpec) (*WebhookConfig, string, error) {
	wh := &WebhookConfig{URL: strings.TrimSpace(s.URL), MaxOutputBytes: MaxOutputBytesDefault, resolved: http.Header{}}
	if wh.URL == "" {
		return nil, "url", errors.New("is required: the URL that receives the POST")
	}
	u, err := url.Parse(wh.URL)
	switch {
	case err != nil:
		return nil, "url", errors.New("is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, "url", fmt.Errorf("must be an http or https URL, not %q", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return nil, "url", errors.New("has no host")
	case u.User != nil:
		return nil, "url", errors.New("must not carry credentials; send them in a header whose value is ${ENV_NAME}")
	case u.Fragment != "":
		return nil, "url", errors.New("must not have a #fragment")
	}
	if len(s.Headers) > 0 {
		wh.Headers = make(map[string]string, len(s.Headers))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		tmpl := s.Headers[name]
		field := "headers." + name
		if !headerNameRE.MatchString(name) {
			return nil, field, errors.New("is not a valid header name")
		}
		canon := http.CanonicalHeaderKey(name)
		for _, r := range reservedHeaders {
			if canon == r {
				return nil, field, errors.New("is set by toolpool itself and cannot be configured")
			}
		}
		value, secrets, err := expandEnv(tmpl, p.opts.LookupEnv)
		if err != nil {
			return nil, field, err
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, field, errors.New("contains a line break or NUL after its ${ENV} references are resolved")
		}
		wh.Headers[name] = tmpl
		wh.resolved.Add(canon, value)
		wh.secrets = append(wh.secrets, secrets...)
	}
	if s.MaxOutputBytes != nil {
		if n := *s.MaxOutputBytes; n < 1 || n > MaxOutputBytesMax {
			return nil, "max_output_bytes", fmt.Errorf("must be between 1 and %d, got %d", MaxOutputBytesMax, n)
		}
		wh.MaxOutputBytes = *s.MaxOutputBytes
	}
	return wh, "", nil
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

func (p *parser) checkExec(s *execSpec) (*ExecConfig, string, error) {
	ex := &ExecConfig{TermGrace: TermGraceDefault, MaxOutputBytes: MaxOutputBytesDefault}
	if len(s.Command) == 0 || strings.TrimSpace(s.Command[0]) == "" {
		return nil, "command", errors.New("is required: the program and its arguments, as a list (no shell)")
	}
	for i, arg := range s.Command {
		if strings.ContainsRune(arg, 0) {
			return nil, fmt.Sprintf("command[%d]", i), errors.New("contains a NUL byte")
		}
	}
	prog, err := p.resolveProgram(s.Command[0])
	if err != nil {
		return nil, "command[0]", err
	}
	ex.Command = append([]string{prog}, s.Command[1:]...)
	for i, name := range s.Env {
		if !envNameRE.MatchString(name) {
			return nil, fmt.Sprintf("env[%d]", i), fmt.Errorf("%q is not an environment variable name; list names only, not NAME=value", name)
		}
	}
	ex.Env = append([]string(nil), s.Env...)
	if s.Dir != nil {
		dir := p.relative(*s.Dir)
		st, err := os.Stat(dir)
		switch {
		case err != nil:
			return nil, "dir", fmt.Errorf("%q cannot be used: %s", *s.Dir, pathErrText(err))
		case !st.IsDir():
			return nil, "dir", fmt.Errorf("%q is not a directory", *s.Dir)
		}
		ex.Dir = dir
	}
	if s.TermGrace != nil {
		d, err := parseDuration(*s.TermGrace)
		switch {
		case err != nil:
			return nil, "term_grace", err
		case d <= 0 || d > TermGraceMax:
			return nil, "term_grace", fmt.Errorf("must be positive and at most %s, got %s", TermGraceMax, *s.TermGrace)
		}
		ex.TermGrace = d
	}
	if s.MaxOutputBytes != nil {
		if n := *s.MaxOutputBytes; n < 1 || n > MaxOutputBytesMax {
			return nil, "max_output_bytes", fmt.Errorf("must be between 1 and %d, got %d", MaxOutputBytesMax, n)
		}
		ex.MaxOutputBytes = *s.MaxOutputBytes
	}
	return ex, "", nil
}

// relative resolves a path of the file relative to the file's directory.
func (p *parser) relative(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(filepath.Dir(p.file), path)
}

// resolveProgram finds the program to run: a path with a slash is taken
// relative to the catalog file's directory; a bare name is looked up in PATH.
func (p *parser) resolveProgram(prog string) (string, error) {
	if !strings.ContainsRune(prog, '/') {
		path, err := p.opts.LookPath(prog)
		if err != nil {
			return "", fmt.Errorf("%q is not found in PATH; give its full path", prog)
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", err
		}
		return abs, nil
	}
	path := p.relative(prog)
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q cannot be used: %s", prog, pathErrText(err))
	case st.IsDir():
		return "", fmt.Errorf("%q is a directory, not a program", prog)
	case st.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("%q is not executable (chmod +x it)", prog)
	}
	return abs, nil
}

func lookPath(file string) (string, error) { return exec.LookPath(file) }

// pathErrText is the reason of a file-system error without the path.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
