package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/orchestrator/policy"
)

// Spend, reuse and consent (the policy gate in front of the dispatcher,
// package policy): what the HTTP API passes to it and tells of it.

// HeaderCache is the answer's header that says what the shared result
// cache did for each call of the turn, in the calls' order,
// comma-separated: hit, miss, coalesced, bypass, or "-" for a call whose
// tool does not cache (or that was answered here). It is absent when no
// call's tool caches. For operators: the model's results do not say it.
const HeaderCache = "Toolpool-Cache"

// OutcomeOverBudget is the outcome of Metrics.ToolCalls for the calls of
// a turn refused as a whole because every one of them was over a budget
// (429).
const OutcomeOverBudget = "over_budget"

// withPolicy puts into ctx what the gate reads of a request: the API key's
// name (budgets on one key), whether the request asks for fresh results
// (Cache-Control: no-cache or Pragma: no-cache) and rep, for the gate to
// fill. A request without a key name or no-cache adds only rep.
func withPolicy(ctx context.Context, r *http.Request, key *apikey.Key, rep *policy.Report) context.Context {
	if key != nil && key.Name != "" {
		ctx = policy.WithKeyName(ctx, key.Name)
	}
	if noCache(r.Header) {
		ctx = policy.WithNoCache(ctx)
	}
	return policy.WithReport(ctx, rep)
}

// noCache reports whether h asks for results not served from a cache:
// a Cache-Control with the directive no-cache (or no-store, or max-age=0),
// or Pragma: no-cache (RFC 9111). Directives are case-insensitive.
func noCache(h http.Header) bool {
	for _, v := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			name, value, _ := strings.Cut(d, "=")
			switch strings.TrimSpace(name) {
			case "no-cache", "no-store":
				return true
			case "max-age":
				if strings.Trim(strings.TrimSpace(value), `"`) == "0" {
					return true
				}
			}
		}
	}
	for _, v := range h.Values("Pragma") {
		for d := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(d), "no-cache") {
				return true
			}
		}
	}
	return false
}

// setCacheHeader sends HeaderCache for a turn of n calls, of which the
// ones at the positions at (nil: all, in order) went to the gate, whose
// report is rep. Nothing is sent when no call's tool caches.
func setCacheHeader(w http.ResponseWriter, rep *policy.Report, n int, at []int) {
	if v := cacheHeader(rep, n, at); v != "" {
		w.Header().Set(HeaderCache, v)
	}
}

// cacheHeader is the value of HeaderCache (see setCacheHeader), "" for
// none.
func cacheHeader(rep *policy.Report, n int, at []int) string {
	if rep == nil || len(rep.Cache) == 0 {
		return ""
	}
	if !slices.ContainsFunc(rep.Cache, func(o policy.CacheOutcome) bool { return o != policy.CacheNone }) {
		return ""
	}
	out := make([]string, n)
	for i := range out {
		out[i] = "-"
	}
	for j, o := range rep.Cache {
		i := j
		if at != nil {
			if j >= len(at) {
				break
			}
			i = at[j]
		}
		if i < n && o != policy.CacheNone {
			out[i] = o.String()
		}
	}
	return strings.Join(out, ",")
}
