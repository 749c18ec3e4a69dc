package rescache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	js "github.com/nats-io/nats.go/jetstream"

	"github.com/toolpool/toolpool/pkg/envelope"
)

// A claim on a key is the entry <key>.run of the bucket, written with the
// claim's hold as its TTL: while it is there, one caller in the fleet runs
// the key's call and the others Await its result.
const claimSuffix = ".run"

// claimValue is the value of a claim entry.
var claimValue = []byte("running")

// releaseMarkerTTL is how long the marker a Release leaves is kept.
const releaseMarkerTTL = time.Minute

// pollEvery bounds how long Await goes without looking at the bucket: a
// claim that expired or a result whose notice was missed (a cluster's
// interest not yet propagated) is seen by then.
const pollEvery = time.Second

// Claim records, fleet-wide, that the caller runs key's call now, for at
// most hold (rounded up to whole seconds, TTLMin to TTLMax): one publish
// that succeeds only when the key has no live claim. claimed is false
// when another caller holds one. A run may have ended between the
// caller's Get and its Claim: the caller looks again before it runs the
// call (the gate does), and Releases the claim when the result is there.
func (s *Store) Claim(ctx context.Context, key string, hold time.Duration) (claimed bool, err error) {
	if !s.base.Running() {
		return false, ErrNotRunning
	}
	if !validKey(key) {
		return false, fmt.Errorf("%w: the key %s is not a cache key", ErrNotCacheable, quote(key))
	}
	hold = min(max(wholeSeconds(hold), TTLMin), TTLMax)
	subj := s.prefix + key + claimSuffix
	var expect uint64 // the claim subject's last sequence: none
	for range 3 {
		ack, err := s.cfg.JS.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: claimValue},
			js.WithExpectLastSequencePerSubject(expect), js.WithMsgTTL(hold))
		if err == nil {
			s.claims.Store(key, ack.Sequence)
			return true, nil
		}
		if !wrongLastSequence(err) {
			s.failed("claim")
			return false, fmt.Errorf("rescache: claim %s: %w", key, err)
		}
		m, err := s.stream.GetLastMsgForSubject(ctx, subj)
		switch {
		case errors.Is(err, js.ErrMsgNotFound):
			expect = 0 // it expired meanwhile
		case err != nil:
			s.failed("claim")
			return false, fmt.Errorf("rescache: claim %s: %w", key, err)
		case s.live(m):
			return false, nil
		default:
			expect = m.Sequence // the marker of a released claim, or one past its TTL
		}
	}
	return false, nil // lost three races: another caller holds it
}

// Release ends the caller's claim on key (made by this Store), unless it
// already expired and another caller claimed the key since: one publish
// of a marker, which Await's subscribers see. The marker carries failed,
// the run's is_error result, when given: the run's waiters take it rather
// than each running the call in turn (it is not cached: a caller that
// comes later claims and runs). Its failure is logged: the claim then
// ends at its hold.
func (s *Store) Release(ctx context.Context, key string, failed *envelope.Result) {
	v, ok := s.claims.LoadAndDelete(key)
	if !ok || !s.base.Running() {
		return
	}
	m := &nats.Msg{Subject: s.prefix + key + claimSuffix, Header: nats.Header{}}
	m.Header.Set("KV-Operation", "PURGE")
	m.Header.Set(js.MsgRollup, js.MsgRollupSubject)
	if failed != nil && failed.IsError {
		if data, err := envelope.EncodeResult(failed); err == nil && len(data) <= maxFailureBytes {
			m.Data = data
		}
	}
	_, err := s.cfg.JS.PublishMsg(ctx, m, js.WithExpectLastSequencePerSubject(v.(uint64)), js.WithMsgTTL(releaseMarkerTTL))
	if err != nil && !wrongLastSequence(err) {
		s.failed("release")
		s.log.Debug("releasing a cache claim failed; it ends at its hold", slog.String("key", key), slog.Any("error", err))
	}
}

// maxFailureBytes bounds the failure a release marker carries: a larger
// one is left out (the waiters then run the call themselves).
const maxFailureBytes = 64 << 10

// Await waits for key's result while another caller's claim on it lasts:
// ok is false when the claim ended (released, or past its hold) without a
// result stored; err is ctx's when ctx ended first. It subscribes to the
// key's two subjects (core NATS: no consumer) and reads the bucket when
// one of them is written, at the claim's end, and at least every
// pollEvery.
func (s *Store) Await(ctx context.Context, key string) (res envelope.Result, ok bool, err error) {
	if !s.base.Running() {
		return envelope.Result{}, false, ErrNotRunning
	}
	if !validKey(key) {
		return envelope.Result{}, false, fmt.Errorf("%w: the key %s is not a cache key", ErrNotCacheable, quote(key))
	}
	notice := make(chan struct{}, 1)
	poke := func(*nats.Msg) {
		select {
		case notice <- struct{}{}:
		default:
		}
	}
	nc := s.cfg.JS.Conn()
	for _, subj := range [...]string{s.prefix + key, s.prefix + key + claimSuffix} {
		sub, err := nc.Subscribe(subj, poke)
		if err != nil {
			s.failed("await")
			return envelope.Result{}, false, fmt.Errorf("rescache: await %s: %w", key, err)
		}
		defer func() { _ = sub.Unsubscribe() }()
	}
	timer := time.NewTimer(pollEvery)
	defer timer.Stop()
	for {
		res, ok, wait, err := s.look(ctx, key)
		if err != nil {
			s.failed("await")
			return envelope.Result{}, false, err
		}
		if ok || wait < 0 {
			return res, ok, nil
		}
		timer.Reset(min(wait, pollEvery))
		select {
		case <-ctx.Done():
			return envelope.Result{}, false, ctx.Err()
		case <-s.base.Stopping():
			return envelope.Result{}, false, ErrNotRunning
		case <-notice:
		case <-timer.C:
		}
	}
}

// look reads key's state: its result (ok), or, without one, how long its
// claim may last by this process's clock (wait), or wait < 0 when there is
// no live claim. The claim is read before the result: a claim gone means
// its result, if any, was stored before.
func (s *Store) look(ctx context.Context, key string) (res envelope.Result, ok bool, wait time.Duration, err error) {
	if res, ok, err = s.get(ctx, key); ok || err != nil {
		return res, ok, 0, err
	}
	m, err := s.stream.GetLastMsgForSubject(ctx, s.prefix+key+claimSuffix)
	switch {
	case err != nil && !errors.Is(err, js.ErrMsgNotFound):
		return envelope.Result{}, false, 0, fmt.Errorf("rescache: await %s: %w", key, err)
	case err == nil && s.live(m):
		return envelope.Result{}, false, max(s.until(m), 0), nil
	}
	if res, ok, err = s.get(ctx, key); ok || err != nil { // the claim ended: stored meanwhile?
		return res, ok, -1, err
	}
	if m != nil {
		res, ok = releasedFailure(m)
	}
	return res, ok, -1, nil
}

// releasedFailure is the is_error result a run released its claim with
// (Release's failed), if m is such a release marker.
func releasedFailure(m *js.RawStreamMsg) (envelope.Result, bool) {
	if len(m.Data) == 0 || m.Header.Get("KV-Operation") != "PURGE" {
		return envelope.Result{}, false
	}
	res, err := envelope.DecodeResult(m.Data)
	if err != nil || !res.IsError {
		return envelope.Result{}, false
	}
	return *res, true
}

// live reports whether m is a claim in force: not a marker, and not past
// its TTL on a server that does not remove it.
func (s *Store) live(m *js.RawStreamMsg) bool {
	if len(m.Data) == 0 || m.Header.Get("KV-Operation") != "" || m.Header.Get(js.MarkerReasonHeader) != "" {
		return false
	}
	return s.serverTTL || !s.expired(m)
}

// until is how long m has to live by its TTL and this process's clock
// (pollEvery when it has no TTL header).
func (s *Store) until(m *js.RawStreamMsg) time.Duration {
	ttl, ok := msgTTL(m)
	if !ok {
		return pollEvery
	}
	return m.Time.Add(ttl).Sub(s.cfg.Now())
}

// wrongLastSequence reports whether err is a publish refused because the
// subject's last sequence was not the one expected.
func wrongLastSequence(err error) bool {
	var apiErr *js.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == js.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == js.JSErrCodeStreamWrongLastSequenceConstant)
}

// wholeSeconds is d rounded up to whole seconds (JetStream's TTL unit).
func wholeSeconds(d time.Duration) time.Duration {
	if part := d % time.Second; part > 0 {
		d += time.Second - part
	}
	return d
}
