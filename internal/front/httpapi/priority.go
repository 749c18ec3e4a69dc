package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/toolpool/toolpool/internal/front/apikey"
	"github.com/toolpool/toolpool/internal/orchestrator/dispatch"
)

// HeaderPriority is the request header that asks for a priority for the
// request's calls: low, normal or high (or the query parameter
// ?priority=; the header wins). Within what the API key allows
// (apikey.Key.MaxPriority); the key's Priority otherwise.
const HeaderPriority = "Toolpool-Priority"

// withScheduling puts what the scheduler needs of a request's calls into
// ctx: the tenant's weight and the priority, the one the request asks for
// or the key's. A priority that is not one is answered 400; one above
// what the key allows, 403; ok is false then. Without a key (no API keys)
// any priority may be asked for.
func (h *Handler) withScheduling(ctx context.Context, w http.ResponseWriter, r *http.Request, q url.Values, key *apikey.Key) (_ context.Context, ok bool) {
	p, limit := dispatch.PriorityNormal, dispatch.PriorityHigh
	if key != nil {
		p, limit = key.Priority, key.MaxPriority
		ctx = dispatch.WithWeight(ctx, key.Weight)
	}
	asked, field := r.Header.Get(HeaderPriority), HeaderPriority+" header"
	if asked == "" {
		asked, field = q.Get("priority"), "priority parameter"
	}
	if asked != "" {
		var err error
		if p, err = apikey.ParsePriority(asked); err != nil {
			h.fail(w, r, http.StatusBadRequest, ErrorInvalidRequest, "the "+field+" "+err.Error())
			return ctx, false
		}
		if p > limit {
			h.fail(w, r, http.StatusForbidden, ErrorForbidden, fmt.Sprintf(
				"the %s asks for priority %s, above what this API key allows: at most %s (its default is %s)",
				field, p, limit, key.Priority))
			return ctx, false
		}
	}
	return dispatch.WithPriority(ctx, p), true
}
