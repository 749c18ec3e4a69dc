package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/toolpool/toolpool/internal/orchestrator/policy"
	"github.com/toolpool/toolpool/pkg/envelope"
)

// State is where an approval is: pending, or decided once.
type State string

// The states of a Record.
const (
	StatePending  State = "pending"
	StateApproved State = "approved"
	StateDenied   State = "denied"
	StateTimedOut State = "timed_out"
)

// Who decided through what: Record.Via and Decide's via.
const (
	ViaCLI     = "cli"
	ViaConsole = "console"
	ViaMCP     = "mcp"
)

// Record is one held call, as the bucket keeps it (JSON, one entry per
// ID).
type Record struct {
	// ID is the approval's id (ID of the call).
	ID string `json:"id"`
	// Tool and Input are the call's: the input as compact JSON, its keys
	// in the order the caller sent them.
	Tool  string          `json:"tool"`
	Input json.RawMessage `json:"input"`
	// Tenant, Session and CallID are the caller's scope and the model's
	// tool_use id; KeyName is the caller's API key's name.
	Tenant  string `json:"tenant,omitempty"`
	Session string `json:"session,omitempty"`
	CallID  string `json:"call_id"`
	KeyName string `json:"key_name,omitempty"`
	// Binding is the hash (hex SHA-256) of the tenant, the tool and the
	// input in canonical form: what the approval is bound to, shown to
	// the approver.
	Binding string `json:"binding"`
	// CreatedAt is when the call was held: first, or again once its
	// approval was spent (Previous). Timeout is how long it waits for a
	// decision (the tool's rule's, at that time).
	CreatedAt time.Time     `json:"created_at"`
	Timeout   time.Duration `json:"timeout_ns"`
	// State is the record's state. Get and List return the effective
	// state: a pending record past its deadline is StateTimedOut.
	State State `json:"state"`
	// DecidedBy, DecidedAt, Reason and Via tell the decision: who (""
	// for a timeout), when, why ("" when they said nothing), through what
	// (ViaCLI, ViaConsole, ViaMCP).
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Reason    string    `json:"reason,omitempty"`
	Via       string    `json:"via,omitempty"`
	// UsedAt is when a gate first let the approved call through to the
	// dispatcher (this replica's clock; zero until then). An approval is
	// for one run: the call sent again while the run's result is kept is
	// answered from it; sent again later, the approval is spent and the
	// call is held again (Store.Use, Store.Hold).
	UsedAt time.Time `json:"used_at,omitzero"`
	// Previous are the earlier approvals of the call, each spent by a run
	// of it, oldest first (the latest maxPrevious): what an approver of a
	// call held again reads about its past.
	Previous []PreviousApproval `json:"previous,omitempty"`
	// Revision is the KV revision the record was read at, and Written the
	// server's time of that revision (for a used record, the time of its
	// use: nothing else writes a used record until it is held again).
	Revision uint64    `json:"-"`
	Written  time.Time `json:"-"`
}

// PreviousApproval is an earlier approval of a call held again: when the
// call was held then, who approved it, when, through what and why, and
// when the run it approved was let through.
type PreviousApproval struct {
	HeldAt     time.Time `json:"held_at"`
	ApprovedBy string    `json:"approved_by"`
	ApprovedAt time.Time `json:"approved_at"`
	Via        string    `json:"via,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	UsedAt     time.Time `json:"used_at"`
}

// maxPrevious bounds Record.Previous: each entry is a person's approval,
// but a record must stay small.
const maxPrevious = 10

// used reports whether r is an approval a gate let its call through on.
func (r *Record) used() bool { return r.State == StateApproved && !r.UsedAt.IsZero() }

// usedStamp is the time r's use is measured from: the server's time of
// the revision that recorded it, or, when unknown, the replica's.
func (r *Record) usedStamp() time.Time {
	if !r.Written.IsZero() {
		return r.Written
	}
	return r.UsedAt
}

// heldAgain is r, a spent approval, held again for c's caller (key) at
// now with timeout: pending, the decision and its use moved to Previous.
func (r Record) heldAgain(key string, now time.Time, timeout time.Duration) Record {
	prev := PreviousApproval{
		HeldAt: r.CreatedAt, ApprovedBy: r.DecidedBy, ApprovedAt: r.DecidedAt, Via: r.Via, Reason: r.Reason, UsedAt: r.UsedAt,
	}
	r.Previous = append(append(make([]PreviousApproval, 0, len(r.Previous)+1), r.Previous...), prev)
	if n := len(r.Previous); n > maxPrevious {
		r.Previous = r.Previous[n-maxPrevious:]
	}
	r.KeyName, r.CreatedAt, r.Timeout, r.State = key, now.UTC(), timeout, StatePending
	r.DecidedBy, r.DecidedAt, r.Reason, r.Via, r.UsedAt = "", time.Time{}, "", "", time.Time{}
	return r
}

// Deadline is when a pending record times out.
func (r *Record) Deadline() time.Time { return r.CreatedAt.Add(r.Timeout) }

// Waited is how long the call waited: until its decision, or until now
// while it is pending.
func (r *Record) Waited(now time.Time) time.Duration {
	end := now
	if r.State != StatePending && !r.DecidedAt.IsZero() {
		end = r.DecidedAt
	}
	return max(end.Sub(r.CreatedAt), 0)
}

// Decision is r as the policy gate sees it.
func (r *Record) Decision(now time.Time) policy.Decision {
	d := policy.Decision{ID: r.ID, By: r.DecidedBy, Reason: r.Reason, Waited: r.Waited(now)}
	switch r.State {
	case StateApproved:
		d.State = policy.Approved
	case StateDenied:
		d.State = policy.Denied
	case StateTimedOut:
		d.State = policy.TimedOut
	}
	return d
}

// effective is r with a pending record past its deadline as timed out
// (not written).
func (r Record) effective(now time.Time) Record {
	if r.State == StatePending && !now.Before(r.Deadline()) {
		r.State, r.DecidedAt = StateTimedOut, r.Deadline()
	}
	return r
}

// idPrefix starts every approval id; idHex is the number of hex
// characters after it.
const (
	idPrefix = "ap-"
	idHex    = 20
)

// ID is the approval id of a call: "ap-" and 20 hex characters of a hash
// of its call key (envelope.CallKey of the same fields). The same call
// sent again gets the same id.
func ID(tenant, session, callID, tool string, input []byte) string {
	sum := sha256.Sum256([]byte("toolpool approval id v1\x00" + envelope.CallKey(tenant, session, callID, tool, input)))
	return idPrefix + hex.EncodeToString(sum[:idHex/2])
}

// ValidID reports whether id could be an approval id: anything else is
// not looked up (it would not be a valid KV key, or could be a wildcard).
func ValidID(id string) bool {
	if len(id) != len(idPrefix)+idHex || id[:len(idPrefix)] != idPrefix {
		return false
	}
	for i := len(idPrefix); i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Binding is the hash an approval is bound to: hex SHA-256 of the tenant,
// the tool and the canonical form of the input (object keys sorted,
// insignificant whitespace dropped, numbers as written), each with its
// length in front.
func Binding(tenant, tool string, input []byte) string {
	h := sha256.New()
	h.Write([]byte("toolpool approval binding v1\x00"))
	for _, f := range [...][]byte{[]byte(tenant), []byte(tool), canonical(input)} {
		h.Write(binary.AppendUvarint(nil, uint64(len(f))))
		h.Write(f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// canonical is the canonical JSON of input, or input as it is when it is
// not JSON.
func canonical(input []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(input))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return input
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return input
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
