package mcpfront

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolpool/toolpool/internal/orchestrator/policy"
)

// Spend, reuse and consent (the policy gate in front of the dispatcher,
// package policy): what /mcp and stdio pass to it and tell of it.

// MetaCache is the _meta key of the shared result cache: on a tools/call,
// "no-cache" asks for a fresh run (its result replaces the stored one);
// on a result, what the cache did: "hit", "miss", "coalesced" or
// "bypass" (absent when the tool does not cache). For operators and
// hosts, not the model: the result's content does not say it.
const MetaCache = "io.toolpool/cache"

// metaNoCache reports whether the value of MetaCache in a request's _meta
// asks for a fresh run.
func metaNoCache(v any) bool {
	s, _ := v.(string)
	return s == "no-cache"
}

// rawMetaNoCache is metaNoCache of the MetaCache entry of a raw _meta;
// false for a _meta that is not an object.
func rawMetaNoCache(raw json.RawMessage) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	var m struct {
		Cache any `json:"io.toolpool/cache"`
	}
	return json.Unmarshal(raw, &m) == nil && metaNoCache(m.Cache)
}

// withPolicy puts into ctx what the gate reads of c: the API key's name
// (budgets on one key), the wish for a fresh run, and rep to fill.
func withPolicy(ctx context.Context, c *callIn, rep *policy.Report) context.Context {
	if c.key != nil && c.key.Name != "" {
		ctx = policy.WithKeyName(ctx, c.key.Name)
	}
	if c.noCache {
		ctx = policy.WithNoCache(ctx)
	}
	return policy.WithReport(ctx, rep)
}

// addCacheMeta sets MetaCache on res to what the cache did for the call,
// when its tool caches.
func addCacheMeta(res *mcp.CallToolResult, rep *policy.Report) {
	if len(rep.Cache) == 0 || rep.Cache[0] == policy.CacheNone {
		return
	}
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[MetaCache] = rep.Cache[0].String()
}
