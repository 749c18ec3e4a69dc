package budget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"
)

// ErrNotFound is the error of a budget that is not defined.
var ErrNotFound = errors.New("no such budget")

// ErrCountersUnsupported is the error of a server without JetStream
// counters (before nats-server 2.12).
var ErrCountersUnsupported = errors.New("budgets need JetStream counters (nats-server 2.12 or later)")

// Status is a budget with its spending now.
type Status struct {
	Def
	// Spent is what is spent in the current period (or window).
	Spent int64
	// Left is what is left: Limit - Spent, at least 0.
	Left int64
	// ResetIn is how long until the period ends; for a rolling window,
	// until the oldest spending in it leaves it (0: nothing spent).
	ResetIn time.Duration
}

// store is the bucket and the stream, bound.
type store struct {
	kv     js.KeyValue
	stream js.Stream
	js     js.JetStream
}

// bind binds the bucket and the stream; with create, it creates those
// that do not exist. Without create, a missing bucket is ErrNotFound.
func bind(ctx context.Context, j js.JetStream, create bool, replicas int) (*store, error) {
	kv, err := j.KeyValue(ctx, BucketDefault)
	if errors.Is(err, js.ErrBucketNotFound) && create {
		kv, err = j.CreateKeyValue(ctx, js.KeyValueConfig{
			Bucket:      BucketDefault,
			Description: "toolpool: budgets, one JSON definition per budget (orchestrator budgets set)",
			History:     5,
			Replicas:    max(replicas, 1),
		})
		if errors.Is(err, js.ErrBucketExists) {
			kv, err = j.KeyValue(ctx, BucketDefault)
		}
	}
	if errors.Is(err, js.ErrBucketNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("budget: bucket %s: %w", BucketDefault, err)
	}
	st, err := bindStream(ctx, j, create, replicas)
	if err != nil {
		return nil, err
	}
	return &store{kv: kv, stream: st, js: j}, nil
}

// bindStream binds the counter stream, creating it with create.
func bindStream(ctx context.Context, j js.JetStream, create bool, replicas int) (js.Stream, error) {
	st, err := j.Stream(ctx, StreamDefault)
	if errors.Is(err, js.ErrStreamNotFound) && create {
		st, err = j.CreateStream(ctx, js.StreamConfig{
			Name:              StreamDefault,
			Description:       "toolpool: budgets' spending, one counter per budget and period",
			Subjects:          []string{SubjectPrefix + ">"},
			Retention:         js.LimitsPolicy,
			MaxMsgsPerSubject: 1,
			MaxAge:            spendMaxAge,
			Storage:           js.FileStorage,
			Replicas:          max(replicas, 1),
			AllowDirect:       true,
			AllowMsgCounter:   true,
		})
		if errors.Is(err, js.ErrStreamNameAlreadyInUse) {
			st, err = j.Stream(ctx, StreamDefault)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("budget: stream %s: %w", StreamDefault, err)
	}
	if !st.CachedInfo().Config.AllowMsgCounter {
		return nil, fmt.Errorf("budget: stream %s: %w", StreamDefault, ErrCountersUnsupported)
	}
	return st, nil
}

// Set validates d and writes it, creating the bucket and the stream when
// they do not exist. The spending so far stays (a changed limit applies to
// it); ResetAt is kept from the budget's last definition.
func Set(ctx context.Context, j js.JetStream, d Def) error {
	if err := d.Validate(); err != nil {
		return err
	}
	s, err := bind(ctx, j, true, 1)
	if err != nil {
		return err
	}
	if old, _, err := s.get(ctx, d.Name); err == nil && d.ResetAt.IsZero() {
		d.ResetAt = old.ResetAt
	}
	return s.put(ctx, d, 0)
}

// Get returns the budget name; ErrNotFound when there is none.
func Get(ctx context.Context, j js.JetStream, name string) (Def, error) {
	s, err := bind(ctx, j, false, 0)
	if err != nil {
		return Def{}, err
	}
	d, _, err := s.get(ctx, name)
	return d, err
}

// Remove deletes the budget name and its spending; ErrNotFound when there
// is none.
func Remove(ctx context.Context, j js.JetStream, name string) error {
	s, err := bind(ctx, j, false, 0)
	if err != nil {
		return err
	}
	if _, _, err := s.get(ctx, name); err != nil {
		return err
	}
	if err := s.kv.Delete(ctx, token(name)); err != nil {
		return fmt.Errorf("budget: remove %s: %w", name, err)
	}
	return s.purge(ctx, name)
}

// Reset purges the spending of the budget name, and stamps its ResetAt
// with now so that every replica drops what it remembers of it;
// ErrNotFound when there is none.
func Reset(ctx context.Context, j js.JetStream, name string, now time.Time) error {
	s, err := bind(ctx, j, false, 0)
	if err != nil {
		return err
	}
	d, rev, err := s.get(ctx, name)
	if err != nil {
		return err
	}
	if err := s.purge(ctx, name); err != nil {
		return err
	}
	d.ResetAt = now.UTC()
	return s.put(ctx, d, rev)
}

// ListStatus returns every budget with its spending at now, by name; none
// when the bucket does not exist.
func ListStatus(ctx context.Context, j js.JetStream, now time.Time) ([]Status, error) {
	s, err := bind(ctx, j, false, 0)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defs, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	return s.statuses(ctx, defs, now)
}

// statuses reads the spending of defs at now.
func (s *store) statuses(ctx context.Context, defs []Def, now time.Time) ([]Status, error) {
	out := make([]Status, 0, len(defs))
	for _, d := range defs {
		st, err := s.status(ctx, d, now)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Status) int { return cmpString(a.Name, b.Name) })
	return out, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// status reads the spending of d at now.
func (s *store) status(ctx context.Context, d Def, now time.Time) (Status, error) {
	st := Status{Def: d}
	if d.Window == 0 {
		id, end := periodID(d.Period, now)
		v, err := s.value(ctx, SubjectPrefix+token(d.Name)+"."+id)
		if err != nil {
			return st, err
		}
		st.Spent, st.ResetIn = v, end.Sub(now)
	} else {
		slots, err := s.window(ctx, d, now)
		if err != nil {
			return st, err
		}
		st.Spent = slots.sum()
		st.ResetIn = slots.oldestLeaves(now)
	}
	st.Spent = max(st.Spent, 0) // a refund may land after a reset
	st.Left = max(d.Limit-st.Spent, 0)
	return st, nil
}

// get reads the definition name and its revision.
func (s *store) get(ctx context.Context, name string) (Def, uint64, error) {
	if !ValidName(name) {
		return Def{}, 0, ErrNotFound
	}
	e, err := s.kv.Get(ctx, token(name))
	if errors.Is(err, js.ErrKeyNotFound) || errors.Is(err, js.ErrKeyDeleted) {
		return Def{}, 0, ErrNotFound
	}
	if err != nil {
		return Def{}, 0, fmt.Errorf("budget: read %s: %w", name, err)
	}
	d, err := decodeDef(e.Value())
	if err != nil {
		return Def{}, 0, fmt.Errorf("budget: %s: %w", name, err)
	}
	return d, e.Revision(), nil
}

// decodeDef reads a definition and checks it.
func decodeDef(b []byte) (Def, error) {
	var d Def
	if err := json.Unmarshal(b, &d); err != nil {
		return Def{}, fmt.Errorf("a definition that cannot be read: %w", err)
	}
	if err := d.Validate(); err != nil {
		return Def{}, err
	}
	return d, nil
}

// put writes d; with rev, only over that revision.
func (s *store) put(ctx context.Context, d Def, rev uint64) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if rev != 0 {
		_, err = s.kv.Update(ctx, token(d.Name), b, rev)
	} else {
		_, err = s.kv.Put(ctx, token(d.Name), b)
	}
	if err != nil {
		return fmt.Errorf("budget: write %s: %w", d.Name, err)
	}
	return nil
}

// list reads every definition; an unreadable one is skipped.
func (s *store) list(ctx context.Context) ([]Def, error) {
	keys, err := s.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("budget: list %s: %w", BucketDefault, err)
	}
	var defs []Def
	for k := range keys.Keys() {
		e, err := s.kv.Get(ctx, k)
		if errors.Is(err, js.ErrKeyNotFound) || errors.Is(err, js.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("budget: read %s: %w", k, err)
		}
		if d, err := decodeDef(e.Value()); err == nil {
			defs = append(defs, d)
		}
	}
	return defs, nil
}

// purge removes every counter of the budget name.
func (s *store) purge(ctx context.Context, name string) error {
	if err := s.stream.Purge(ctx, js.WithPurgeSubject(subjectFilter(name))); err != nil {
		return fmt.Errorf("budget: purge the spending of %s: %w", name, err)
	}
	return nil
}

// value reads a counter: 0 when it does not exist.
func (s *store) value(ctx context.Context, subj string) (int64, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, js.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("budget: read %s: %w", subj, err)
	}
	return counterValue(m.Data)
}

// counterValue reads a counter message's body, {"val":"123"}.
func counterValue(b []byte) (int64, error) {
	var v struct {
		Val string `json:"val"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, fmt.Errorf("budget: a counter that cannot be read: %w", err)
	}
	return parseTotal(v.Val)
}

// parseTotal reads a counter's total.
func parseTotal(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("budget: a counter total that cannot be read: %q", s)
	}
	return n, nil
}

// incrHeader is the counter increment header.
const incrHeader = "Nats-Incr"

// incr adds n (negative: subtracts) to the counter subj and returns its
// new total.
func (s *store) incr(ctx context.Context, subj string, n int64) (int64, error) {
	m := &nats.Msg{Subject: subj, Header: nats.Header{incrHeader: []string{strconv.FormatInt(n, 10)}}}
	ack, err := s.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("budget: spend on %s: %w", subj, err)
	}
	return parseTotal(ack.Value)
}
