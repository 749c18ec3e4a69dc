// Package rescache is the orchestrator's shared result cache: the
// successful results of the tools that opt in (tools.CachePolicy), kept
// for their TTL in the JetStream key-value bucket toolpool_cache, where
// every orchestrator replica finds them.
//
// A Store implements policy.Cache. Its key (Key) is a SHA-256 of the tool,
// the tool's version (pooltype.ToolInfo.Version: a change of the tool
// never serves an old result), the canonical form of the input (object
// keys sorted, insignificant whitespace dropped, numbers as written) and,
// unless the tool's scope is global, the caller's tenant. Key is a pure
// function: it costs no round trip.
//
// Get is one direct get of the key's last message; Put is one publish
// with a Nats-TTL header, which replaces what the key held (the bucket
// keeps one message per key). Entries expire on the server at their TTL
// (nats-server 2.11 or later; on an older server, Get ignores an entry
// past its TTL, and the bucket's age limit removes it after TTLMax).
//
// On a replicated bucket any replica may answer a direct get, a follower
// that has not yet applied the latest Put included: a result stored a
// moment ago can read as a miss for that moment. A miss only costs a run
// (a cache never promises more); decisions that must not see the past,
// such as whether a claim is live, are made by publishes that expect the
// key's last sequence, which only the stream's leader accepts.
//
// The store only stores and reads: which calls are cached, bypassed or
// coalesced is the policy gate's decision (package policy).
package rescache
