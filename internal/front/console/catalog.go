package console

import (
	"context"
	"encoding/json"
	"time"
)

// catalogEntry is a tool's catalog entry as the console shows it: an
// explicit allow-list of the fields of its announcement. Whatever else a
// catalog file holds for the tool (a webhook's URL and headers, an exec
// entry's environment, credentials) never reaches the live catalog, and
// nothing here would render it if it did.
type catalogEntry struct {
	Name        string
	Description string
	InputSchema json.RawMessage
	Timeout     time.Duration
	MaxAttempts int
	Concurrency int
	Idempotent  bool
	Fairness    string
	PerKey      *perKey
}

// perKey is a tool's per-key limits, allow-listed.
type perKey struct {
	Concurrency int
	Rate        int
	Per         time.Duration
	Burst       int
}

// catalogEntry returns the tool's entry from its first live worker's
// announcement; nil without one.
func (c *Console) catalogEntry(ctx context.Context, tool string) *catalogEntry {
	if c.cfg.Live == nil {
		return nil
	}
	anns := c.cfg.Live.Workers(ctx, tool)
	if len(anns) == 0 {
		return nil
	}
	a := anns[0]
	e := &catalogEntry{
		Name: a.Tool.Name, Description: a.Tool.Description, InputSchema: a.Tool.InputSchema,
		Timeout: a.Timeout, MaxAttempts: a.MaxAttempts, Concurrency: a.Concurrency,
		Idempotent: a.Idempotent, Fairness: a.Fairness,
	}
	if a.PerKey != nil && !a.PerKey.IsZero() {
		e.PerKey = &perKey{Concurrency: a.PerKey.Concurrency, Rate: a.PerKey.Rate, Per: a.PerKey.Per, Burst: a.PerKey.Burst}
	}
	return e
}
