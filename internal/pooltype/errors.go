package pooltype

import "errors"

// The errors every side and the clients match with errors.Is: one value
// each, so that one check covers the dispatcher in this process, the HTTP
// client and the binaries.
var (
	// ErrUnavailable is wrapped by the errors of calls the pool could not
	// take: JetStream did not store them, the dispatcher is stopped, an
	// orchestrator answered 503 or could not be reached.
	ErrUnavailable = errors.New("tool pool unavailable")
	// ErrSaturated is wrapped by the errors of turns the pool refused
	// because it is saturated (admission control, HTTP 429). Such errors
	// wrap ErrUnavailable too.
	ErrSaturated = errors.New("tool pool saturated")
	// ErrConnClosed is the cause of a process stopping because its NATS
	// connection closed for good (a protocol error, refused credentials:
	// reconnects never give up otherwise). A process in that state is a
	// zombie; the binaries exit non-zero so that a supervisor starts a
	// fresh one.
	ErrConnClosed = errors.New("toolpool: the NATS connection is closed for good")
)
