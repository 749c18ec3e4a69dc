package dispatch

import (
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolpool/toolpool/internal/infra/subject"
	"github.com/toolpool/toolpool/jetstream"
)

// The repeated-failure advice across replicas. Each dispatcher counts,
// per session and tool, the is_error results in a row (session.go); with
// replicas behind a load balancer, one host conversation's calls reach
// several of them. So every dispatcher tells the others, on core NATS
// (jetstream.AdviceSubject), of what changed a count: each is_error result
// of a turn, and each success that ended a run its own tracker held. A
// success of a session and tool without a run changes nothing anywhere —
// a run is known to every replica through these messages — so the happy
// path publishes nothing. Each dispatcher applies the others' messages to
// its tracker as if the turn had been its own, and ignores its own.
//
// A message names the session by its key (a digest of tenant and session,
// scopeKey), never by their bytes. The tracker's bounds hold for what
// arrives as for local turns: a success of a session not tracked is
// dropped, and failures of more sessions than MaxSessions push the least
// recently used out. Only orchestrators may publish on the subject (the
// accounts file), and a message is checked all the same: a valid instance
// token, a 16-byte key, valid tool names, at most maxAdviceOutcomes.
//
// Ordering is best-effort: the messages of one replica arrive in order,
// those of two replicas in any order. When one conversation's calls run on
// two replicas at the same time, a success on B may miss a failure A
// has just announced (B publishes nothing, holding no run), and A keeps a
// run of one that a success ended; or the two messages apply in another
// order on a third replica. The count is then off by the racing calls,
// for that session and tool, until its next success. A host conversation
// waits for a turn's results before the next turn (a model round trip,
// seconds, against a message's sub-millisecond hop), so this takes calls
// of one conversation that overlap in time; the advice is a hint in a
// result, not a gate, and early or late by one it is still right.

// maxAdviceOutcomes bounds the outcomes of one message: a turn with more
// is told in several messages, a message with more is dropped.
const maxAdviceOutcomes = 128

// adviceMsg is the body of a message on jetstream.AdviceSubject.
type adviceMsg struct {
	Instance string `json:"instance"`
	// Session is the session's scopeKey in hex.
	Session string `json:"session"`
	// Outcomes are what changed the counts, in the turn's order.
	Outcomes []adviceOutcome `json:"outcomes"`
}

// adviceOutcome is an is_error result of Tool (Failed), or a success that
// ended a run of them.
type adviceOutcome struct {
	Tool   string `json:"tool"`
	Failed bool   `json:"failed,omitempty"`
}

// fleetAdvice shares a dispatcher's failure counts with the other
// replicas, from Start until teardown. A nil *fleetAdvice tells no one.
type fleetAdvice struct {
	d   *Dispatcher
	sub *nats.Subscription
}

// startAdvice subscribes to the other replicas' messages. It is called
// by Start; teardown unsubscribes.
func (d *Dispatcher) startAdvice() error {
	a := &fleetAdvice{d: d}
	sub, err := d.nc.Subscribe(jetstream.AdviceSubject, a.heard)
	if err != nil {
		return err
	}
	a.sub = sub
	d.advice = a
	return nil
}

// stop unsubscribes.
func (a *fleetAdvice) stop() {
	if a != nil {
		_ = a.sub.Unsubscribe()
	}
}

// tell publishes what in outs, recorded for key, changed a count: the
// failures and the successes that ended a run. A turn of successes alone
// publishes nothing and allocates nothing.
func (a *fleetAdvice) tell(key scopeKey, outs []outcome) {
	if a == nil {
		return
	}
	var msg *adviceMsg
	for i := range outs {
		o := &outs[i]
		if !o.isError && !o.reset || !subject.ValidToken(o.tool) {
			continue // an invalid name (an unknown tool's) is counted here only
		}
		if msg == nil {
			msg = &adviceMsg{Instance: a.d.cfg.Instance, Session: hex.EncodeToString(key[:])}
		}
		msg.Outcomes = append(msg.Outcomes, adviceOutcome{Tool: o.tool, Failed: o.isError})
		if len(msg.Outcomes) == maxAdviceOutcomes {
			a.publish(msg)
			msg.Outcomes = msg.Outcomes[:0]
		}
	}
	if msg != nil && len(msg.Outcomes) > 0 {
		a.publish(msg)
	}
}

func (a *fleetAdvice) publish(msg *adviceMsg) {
	data, err := json.Marshal(msg)
	if err == nil {
		err = a.d.nc.Publish(jetstream.AdviceSubject, data)
	}
	if err != nil {
		a.d.log.Debug("telling the other replicas of failures failed", slog.Any("error", err))
	}
}

// heard applies another replica's message to the tracker.
func (a *fleetAdvice) heard(m *nats.Msg) {
	key, outs, ok := a.decode(m.Data)
	if !ok {
		return
	}
	a.d.sessions.recordKey(key, time.Now(), outs)
}

// decode checks a message and returns its key and outcomes; ok is false
// for a message to drop: invalid, or this dispatcher's own.
func (a *fleetAdvice) decode(data []byte) (key scopeKey, outs []outcome, ok bool) {
	var msg adviceMsg
	if json.Unmarshal(data, &msg) != nil || msg.Instance == a.d.cfg.Instance || !subject.ValidToken(msg.Instance) ||
		len(msg.Outcomes) == 0 || len(msg.Outcomes) > maxAdviceOutcomes ||
		hex.DecodedLen(len(msg.Session)) != len(key) {
		return key, nil, false
	}
	if _, err := hex.Decode(key[:], []byte(msg.Session)); err != nil {
		return key, nil, false
	}
	outs = make([]outcome, len(msg.Outcomes))
	for i, o := range msg.Outcomes {
		if !subject.ValidToken(o.Tool) {
			return key, nil, false
		}
		outs[i] = outcome{tool: o.Tool, isError: o.Failed}
	}
	return key, outs, true
}
