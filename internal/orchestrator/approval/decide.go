package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Errors of Decide, matched with errors.Is.
var (
	// ErrAlreadyDecided: the approval was approved or denied before
	// (the error is a *DecidedError naming who).
	ErrAlreadyDecided = errors.New("already decided")
	// ErrTimedOut: the approval's deadline passed without a decision
	// (the error is a *DecidedError).
	ErrTimedOut = errors.New("timed out")
	// ErrInvalid: a decision's by, reason or via is not acceptable.
	ErrInvalid = errors.New("invalid decision")
)

// Limits of a decision's words.
const (
	maxBy     = 128
	maxReason = 1000
)

// DecidedError is Decide's error for an approval decided before: Record
// is the decision that stands.
type DecidedError struct {
	Record Record
}

// Error names the decision that stands: "approval ap-… was already
// approved by alice at 2026-12-02T08:00:00Z", or "approval ap-… timed
// out at …: no decision within 15m0s".
func (e *DecidedError) Error() string {
	r := e.Record
	at := r.DecidedAt.UTC().Format(time.RFC3339)
	if r.State == StateTimedOut {
		return "approval " + r.ID + " timed out at " + at + ": no decision within " + r.Timeout.String()
	}
	s := "approval " + r.ID + " was already " + string(r.State) + " by " + r.DecidedBy + " at " + at
	if r.Via != "" {
		s += " (via " + r.Via + ")"
	}
	return s
}

// Is matches ErrTimedOut for a timeout, ErrAlreadyDecided for a decision.
func (e *DecidedError) Is(target error) bool {
	if e.Record.State == StateTimedOut {
		return target == ErrTimedOut
	}
	return target == ErrAlreadyDecided
}

// Decide approves (approve true) or denies the pending approval id, once:
// by is who decides (required), reason why (optional), via through what
// (ViaCLI, ViaConsole, ViaMCP). It returns the decided record, or an
// error: ErrNotFound, ErrInvalid, or a *DecidedError (ErrAlreadyDecided,
// ErrTimedOut) naming the decision that stands. The decision is logged
// ("approval decided") and recorded in the record.
func (s *Store) Decide(ctx context.Context, id string, approve bool, by, reason, via string) (Record, error) {
	by, reason = strings.TrimSpace(by), strings.TrimSpace(reason)
	if err := checkDecision(by, reason, via); err != nil {
		return Record{}, err
	}
	state := StateDenied
	if approve {
		state = StateApproved
	}
	for range 10 { // a conflict is another decision or the timeout: read again
		r, err := s.read(ctx, id)
		if err != nil {
			return Record{}, err
		}
		now := s.cfg.Now()
		if r.State == StatePending && !now.Before(r.Deadline()) {
			r = s.settle(ctx, r)
		}
		if r.State != StatePending {
			return r, &DecidedError{Record: r}
		}
		d := r
		d.State, d.DecidedBy, d.DecidedAt, d.Reason, d.Via = state, by, now.UTC(), reason, via
		data, err := json.Marshal(d)
		if err != nil {
			return Record{}, fmt.Errorf("approval %s: encode: %w", id, err)
		}
		rev, err := s.kv.Load().Update(ctx, id, data, r.Revision) // r was read: the bucket is bound
		if conflict(err) {
			continue
		}
		if err != nil {
			return Record{}, fmt.Errorf("approval %s: write the decision: %w", id, err)
		}
		d.Revision = rev
		s.cfg.Metrics.Decided(string(state))
		s.log.Info("approval decided", "approval", id, "tool", d.Tool, "tenant", d.Tenant, "session", d.Session,
			"decision", string(state), "by", by, "via", via, "reason", reason, "waited", d.Waited(now))
		return d, nil
	}
	return Record{}, fmt.Errorf("approval %s: the record kept changing", id)
}

// checkDecision names what is wrong with a decision's words.
func checkDecision(by, reason, via string) error {
	switch {
	case by == "":
		return fmt.Errorf("%w: by: say who decides", ErrInvalid)
	case utf8.RuneCountInString(by) > maxBy:
		return fmt.Errorf("%w: by: at most %d characters", ErrInvalid, maxBy)
	case !printable(by):
		return fmt.Errorf("%w: by: %q has control characters", ErrInvalid, by)
	case utf8.RuneCountInString(reason) > maxReason:
		return fmt.Errorf("%w: reason: at most %d characters, got %d", ErrInvalid, maxReason, utf8.RuneCountInString(reason))
	case !printable(strings.NewReplacer("\n", " ", "\t", " ").Replace(reason)):
		return fmt.Errorf("%w: reason: control characters other than new lines and tabs", ErrInvalid)
	}
	switch via {
	case ViaCLI, ViaConsole, ViaMCP:
		return nil
	}
	return fmt.Errorf("%w: via: %q; want %s, %s or %s", ErrInvalid, via, ViaCLI, ViaConsole, ViaMCP)
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
