// Package jsonwire is the hand-written JSON of toolpool, in one place: the
// syntax check (Valid, as json.Valid but several times faster), the walk
// over values without decoding them (SkipSpace, SkipString, SkipValue, Trim),
// strings (ValidString, Plain, PlainASCII, Unquote, AppendString) and
// integers (ParseInt). pkg/envelope builds its codec on it, pkg/tools its
// fast schema check, the HTTP API (internal/front/httpapi) its reading of
// request bodies and pkg/client its reading of answers; it imports nothing
// of the module.
//
// Everything here reads untrusted bytes: every function checks its bounds,
// so malformed input never makes it panic. Fuzzers hold it to encoding/json
// (pkg/envelope's FuzzValidJSON and FuzzDecodeCall) and to the schema engine
// (pkg/tools' FuzzFastCheck); its speed is measured by their benchmarks.
package jsonwire
