// Package settle is the one settle step of a call and the records it
// writes. Settle carries out a classify.Verdict on a delivered call
// message in a fixed order: the dead letter first (an Entry on
// tools.dlq.<tool> in TOOL_DLQ, with every failed Attempt), then the
// result to the caller, then Ack, Nak with delay or Term, so that a crash
// between two steps never loses a call or its record. The worker side
// settles its calls through it, and the fleet's poison watcher settles
// the calls that killed their workers through it too.
//
// History is the attempts bucket (a JetStream key-value bucket, by
// default toolpool_attempts): each failed attempt of a call still in play,
// and the start markers of calls to tools that are not idempotent, so that
// a dead letter carries every attempt whichever worker made it. The fleet
// reads the records back (Decode, History.Load) to list and replay dead
// letters.
package settle
