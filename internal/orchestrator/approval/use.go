package approval

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/jetstream"
)

// An approval is for one run. The gate calls Use before it lets an
// approved call through to the dispatcher; the first Use writes the
// record's used_at (compare-and-set on its revision). The same call sent
// again goes on while the first run's result can still be found: for
// ResultsMaxAge after that write, the dispatcher answers it from the
// stored result, or joins the run still in flight. Sent again later, it
// would find no result and run a second time; so then the approval is
// spent, and Hold (or Use) holds the call again: pending, with a new
// request time and deadline, the spent approval kept in Previous.
//
// The window is measured with the servers' clock: from the time the
// server stored the use (the revision's time) to the time in the reply to
// a stream info request. TOOL_RESULTS' max age counts on the servers'
// clock too, from the time a result was stored (after the use), so no
// replica's clock is involved: a replica whose clock is behind does not
// let the call through after its result expired, one whose clock is ahead
// does not hold it again early.

// Use records that the approved call c (approval id) goes on to the
// dispatcher now, and says whether it may: Approved the first time (the
// use is written), and for a use within ResultsMaxAge of the first (the
// call sent again: the dispatcher answers it from the first run's
// result). A spent approval's call is held again (Pending). Any other
// state is returned as it is (Pending, Denied, TimedOut: the call was
// held again meanwhile). On an error the call must not run (its use may
// have been written all the same, when the error came after the write:
// then the call sent again within the window runs, later it is held
// again).
func (s *Store) Use(ctx context.Context, c *policy.Call, id string) (policy.Decision, error) {
	if _, err := s.bucket(); err != nil {
		return policy.Decision{ID: id}, err
	}
	for range 10 { // a conflict is another replica's use or hold: read again
		r, err := s.Get(ctx, id)
		if err != nil {
			return policy.Decision{ID: id}, err
		}
		if r.used() {
			if r, err = s.spendIfDue(ctx, r, c); err != nil {
				return policy.Decision{ID: id}, err
			}
		}
		if r.State != StateApproved || r.used() {
			return r.Decision(s.cfg.Now()), nil
		}
		now := s.cfg.Now()
		u := r
		u.UsedAt = now.UTC()
		data, err := json.Marshal(u)
		if err != nil {
			return policy.Decision{ID: id}, fmt.Errorf("approval %s: encode: %w", id, err)
		}
		rev, err := s.kv.Load().Update(ctx, id, data, r.Revision) // r was read: the bucket is bound
		if conflict(err) {
			continue
		}
		if err != nil {
			return policy.Decision{ID: id}, fmt.Errorf("approval %s: record its use: %w", id, err)
		}
		u.Revision, u.Written = rev, time.Time{}
		s.log.Info("approved call let through", "approval", id, "tool", u.Tool, "tenant", u.Tenant, "session", u.Session,
			"call", u.CallID, "approved_by", u.DecidedBy)
		return u.Decision(now), nil
	}
	return policy.Decision{ID: id}, fmt.Errorf("approval %s: the record kept changing", id)
}

// spendIfDue returns r, held again for c when it is an approval spent by
// a run whose result is no longer kept. When another replica held it
// again (or used it) first, it returns what they wrote.
func (s *Store) spendIfDue(ctx context.Context, r Record, c *policy.Call) (Record, error) {
	for range 10 {
		if !r.used() {
			return r, nil
		}
		kept, now, err := s.resultsKept(ctx)
		if err != nil {
			return r, err
		}
		if kept <= 0 || now.Before(r.usedStamp().Add(kept)) {
			return r, nil // its run's result can still be found
		}
		again, err := s.holdAgain(ctx, r, c, kept)
		if err == nil || !conflict(err) {
			return again, err
		}
		// Another replica used it first, or held it again (and it may have
		// been decided, or have timed out, since): what it is now.
		if r, err = s.Get(ctx, r.ID); err != nil {
			return r, err
		}
	}
	return r, fmt.Errorf("approval %s: the record kept changing", r.ID)
}

// holdAgain writes r, a spent approval, pending again for c's caller
// (compare-and-set on r's revision: a conflict is returned as it is).
func (s *Store) holdAgain(ctx context.Context, r Record, c *policy.Call, kept time.Duration) (Record, error) {
	kv, err := s.bucket()
	if err != nil {
		return r, err
	}
	timeout := holdTimeout(c)
	again := r.heldAgain(c.Key, s.cfg.Now(), timeout)
	data, err := json.Marshal(again)
	if err != nil {
		return r, fmt.Errorf("approval %s: encode: %w", r.ID, err)
	}
	if len(data) > kv.maxRec {
		return r, fmt.Errorf("approval %s: the call is too large to hold for approval again: its record is %d bytes, the bucket takes %d", r.ID, len(data), kv.maxRec)
	}
	rev, err := kv.Update(ctx, r.ID, data, r.Revision)
	if err != nil {
		return r, err
	}
	again.Revision, again.Written = rev, time.Time{}
	s.cfg.Metrics.Held()
	s.log.Info("call held for approval again", "approval", r.ID, "tool", r.Tool, "tenant", r.Tenant, "session", r.Session,
		"call", r.CallID, "key", c.Key, "timeout", timeout, "approved_before_by", r.DecidedBy, "used_at", r.UsedAt,
		"results_kept", kept)
	return again, nil
}

// resultsKept is how long a run's result is kept (the window of an
// approval's use) and the server's time now. With Config.ResultsMaxAge
// zero, both come from TOOL_RESULTS' info (0 when it keeps results for
// good); without that stream, or with ResultsMaxAge set, from the
// configuration (ResultsMaxAgeDefault) and the bucket's info.
func (s *Store) resultsKept(ctx context.Context) (time.Duration, time.Time, error) {
	if s.cfg.ResultsMaxAge == 0 {
		st, err := s.cfg.JS.Stream(ctx, jetstream.StreamResults)
		switch {
		case err == nil:
			info := st.CachedInfo()
			return info.Config.MaxAge, s.serverTime(info), nil
		case !errors.Is(err, js.ErrStreamNotFound):
			return 0, time.Time{}, fmt.Errorf("approval: read how long %s keeps results: %w", jetstream.StreamResults, err)
		}
	}
	kv, err := s.bucket()
	if err != nil {
		return 0, time.Time{}, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("approval: read the server's time: %w", err)
	}
	var info *js.StreamInfo
	if b, ok := st.(*js.KeyValueBucketStatus); ok {
		info = b.StreamInfo()
	}
	return cmp.Or(s.cfg.ResultsMaxAge, jetstream.ResultsMaxAgeDefault), s.serverTime(info), nil
}

// serverTime is the server's time in info, or this replica's when the
// server did not say (an older server).
func (s *Store) serverTime(info *js.StreamInfo) time.Time {
	if info == nil || info.TimeStamp.IsZero() {
		return s.cfg.Now()
	}
	return info.TimeStamp
}
