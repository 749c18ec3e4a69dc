// Package embedded runs a NATS server with JetStream inside this process:
// the pool on one machine, or in a test, with nothing to install. It is the
// only package of the module (tests aside) that imports nats-server, so
// that nothing else links it: the worker binary does not.
//
// Start listens on a loopback address by default, keeps its store under
// Options.DataDir, locked against a second server on the same directory
// (ErrDataDirInUse), and names a taken address (ErrListenAddrInUse).
// The root package's Embedded wraps it for programs.
package embedded
