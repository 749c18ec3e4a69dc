// Package promtest helps tests check what toolpool exposes to Prometheus:
// it scrapes and parses the text format, looks up sample values, runs
// promtool on scrapes and rule files, and lists the metric names a PromQL
// expression uses.
//
//	fams := promtest.Parse(t, promtest.Scrape(t, srv.URL+"/metrics"))
//	fams = promtest.Gather(t, orch.Metrics()) // a registry in this process
//	if got := fams.Value("toolpool_worker_attempts_total", "tool", "echo"); got != 1 { … }
//	promtest.CheckMetrics(t, text) // promtool check metrics
//
// promtool comes from Debian's prometheus package. When it is not on PATH,
// the promtool helpers fail the test in CI (CI=true) and skip it elsewhere.
package promtest

import (
	"bytes"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/toolpool/toolpool/internal/testdeps"
)

// Scrape GETs url and returns the body, in the text exposition format.
func Scrape(t testing.TB, url string) []byte {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("promtest: %v", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("promtest: scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("promtest: scrape %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("promtest: scrape %s: %s\n%s", url, resp.Status, body)
	}
	return body
}

// Families are parsed metric families by name.
type Families map[string]*dto.MetricFamily

// Parse parses a scrape in the text format.
func Parse(t testing.TB, text []byte) Families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("promtest: parse scrape: %v\n%s", err, text)
	}
	return fams
}

// Gatherer is what Gather reads: a Prometheus registry in the test's
// process, such as toolpool.Orchestrator.Metrics().
type Gatherer interface {
	Gather() ([]*dto.MetricFamily, error)
}

// Gather returns what g holds now, as Parse returns a scrape.
func Gather(t testing.TB, g Gatherer) Families {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("promtest: gather: %v", err)
	}
	fams := make(Families, len(mfs))
	for _, mf := range mfs {
		fams[mf.GetName()] = mf
	}
	return fams
}

// histogram suffixes of sample names.
var sampleSuffixes = []string{"_bucket", "_count", "_sum"}

// family returns the family of a sample name: name itself, or for
// name_bucket, name_count and name_sum a histogram or summary name, with
// the suffix.
func (f Families) family(name string) (*dto.MetricFamily, string) {
	if mf, ok := f[name]; ok {
		return mf, ""
	}
	for _, suf := range sampleSuffixes {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		if mf, ok := f[base]; ok && (mf.GetType() == dto.MetricType_HISTOGRAM || mf.GetType() == dto.MetricType_SUMMARY) {
			if suf == "_bucket" && mf.GetType() != dto.MetricType_HISTOGRAM {
				return nil, ""
			}
			return mf, suf
		}
	}
	return nil, ""
}

// Has reports whether the scrape has samples named name (a family name, or
// a histogram's name_bucket, name_count or name_sum).
func (f Families) Has(name string) bool {
	mf, _ := f.family(name)
	return mf != nil && len(mf.GetMetric()) > 0
}

// Value returns the sum of the samples named name whose labels include
// every pair of labels (name, value, name, value, …); 0 when none does.
// For a histogram, name_count and name_sum give its count and sum.
func (f Families) Value(name string, labels ...string) float64 {
	mf, suf := f.family(name)
	if mf == nil {
		return 0
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case suf == "_count" && m.GetHistogram() != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case suf == "_sum" && m.GetHistogram() != nil:
			sum += m.GetHistogram().GetSampleSum()
		case suf == "_count" && m.GetSummary() != nil:
			sum += float64(m.GetSummary().GetSampleCount())
		case suf == "_sum" && m.GetSummary() != nil:
			sum += m.GetSummary().GetSampleSum()
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}

// LabelValues returns the sorted distinct values of label among the
// samples of family name.
func (f Families) LabelValues(name, label string) []string {
	mf, _ := f.family(name)
	if mf == nil {
		return nil
	}
	var out []string
	for _, m := range mf.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label && !slices.Contains(out, lp.GetValue()) {
				out = append(out, lp.GetValue())
			}
		}
	}
	slices.Sort(out)
	return out
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Promtool returns the path of promtool (testdeps.Promtool: with CI=true
// installed when missing, or the test fails; elsewhere a missing promtool
// skips the test, naming the command that installs it).
func Promtool(t testing.TB) string {
	t.Helper()
	return testdeps.Promtool.Path(t)
}

// CheckMetrics runs `promtool check metrics` on a scrape and fails the test
// with its findings.
func CheckMetrics(t testing.TB, text []byte) {
	t.Helper()
	cmd := exec.Command(Promtool(t), "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// CheckRules runs `promtool check rules` on the rule files.
func CheckRules(t testing.TB, files ...string) {
	t.Helper()
	cmd := exec.Command(Promtool(t), append([]string{"check", "rules"}, files...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}

// TestRules runs `promtool test rules` on the rule test files (the alerts
// fed with series, their firing checked).
func TestRules(t testing.TB, files ...string) {
	t.Helper()
	cmd := exec.Command(Promtool(t), append([]string{"test", "rules"}, files...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

var (
	stringLit  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	braces     = regexp.MustCompile(`\{[^{}]*\}`)
	brackets   = regexp.MustCompile(`\[[^\[\]]*\]`)
	grouping   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	identifier = regexp.MustCompile(`[$]?[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// keywords of PromQL that look like identifiers but name no metric.
var keywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
	"Inf": true, "NaN": true, "start": true, "end": true,
}

// MetricNames returns the metric names a PromQL expression selects,
// sorted, each once: identifiers that are not functions, aggregations,
// keywords, label names (in braces or grouping clauses) or Grafana
// variables ($name).
func MetricNames(expr string) []string {
	s := stringLit.ReplaceAllString(expr, `""`)
	s = braces.ReplaceAllString(s, " ")
	s = brackets.ReplaceAllString(s, " ")
	s = grouping.ReplaceAllString(s, " ")
	var out []string
	for _, loc := range identifier.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if strings.HasPrefix(name, "$") || keywords[name] {
			continue
		}
		if loc[0] > 0 && (isDigit(s[loc[0]-1]) || s[loc[0]-1] == '.') {
			continue // the unit of a duration or the exponent of a number
		}
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		if (strings.HasPrefix(rest, "by") || strings.HasPrefix(rest, "without")) && isAggregation(name) {
			continue // sum by (…) (…): the grouping was removed above
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

func isAggregation(name string) bool {
	switch name {
	case "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
		"bottomk", "topk", "quantile", "limitk", "limit_ratio":
		return true
	}
	return false
}
