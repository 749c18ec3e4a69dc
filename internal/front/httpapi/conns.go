package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ProbeConns are the connections kept beside ServerConfig.MaxConns for
// the health probes: when the cap is reached, a new connection takes one
// of them, and on it only ServerConfig.OpenPaths are answered (anything
// else gets 503 and the connection is closed). A kubelet's or a load
// balancer's probes open a connection each, so a server full of clients
// still answers /healthz and /readyz.
const ProbeConns = 16

// probeReadWindow bounds the reading of the requests on a probe
// connection, from its accept: a probe sends its request at once, and a
// client that took a probe slot to hold it gives it back this soon.
const probeReadWindow = 5 * time.Second

// limitListener gives each accepted connection a slot: one of slots, or
// when they are all taken one of probes (a probe connection); a
// connection beyond both is closed at once.
type limitListener struct {
	net.Listener
	slots   chan struct{}
	probes  chan struct{}
	metrics Metrics
	stall   time.Duration // limitConn.stall
	// probeWindow is a probe connection's read window (probeReadWindow).
	probeWindow time.Duration
}

// Accept returns the next connection that gets a slot.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitConn{Conn: c, release: l.slots, stall: l.stall}, nil
		default:
		}
		select {
		case l.probes <- struct{}{}:
			lc := &limitConn{Conn: c, release: l.probes, stall: l.stall, probe: true, readBy: time.Now().Add(l.probeWindow)}
			_ = lc.SetReadDeadline(time.Time{}) // the window's
			return lc, nil
		default:
			l.metrics.Refused(RefusedConnections)
			_ = c.Close()
		}
	}
}

// limitConn is an accepted connection. It gives its slot back when
// closed; each of its writes must end within stall, whatever write
// deadline the handlers set (a client that does not read its answer is
// cut off, its answer's memory freed); and it passes CloseWrite on, so
// that an answer sent with Connection: close (a 413) reaches the client
// before the connection closes rather than being lost to a reset.
type limitConn struct {
	net.Conn
	once    sync.Once
	release chan struct{}
	stall   time.Duration
	probe   bool      // a probe connection: OpenPaths only
	readBy  time.Time // a probe connection's reads end by then
	// deadline is the write deadline set by the server or a handler, in
	// Unix nanoseconds; 0 is none.
	deadline atomic.Int64
}

// Close closes the connection and frees its slot.
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { <-c.release })
	return err
}

// Write writes p by the write deadline set, and within stall.
func (c *limitConn) Write(p []byte) (int, error) {
	by := time.Now().Add(c.stall)
	if d := c.deadline.Load(); d != 0 && d < by.UnixNano() {
		by = time.Unix(0, d)
	}
	_ = c.Conn.SetWriteDeadline(by)
	return c.Conn.Write(p)
}

// SetWriteDeadline records t for Write, and sets it.
func (c *limitConn) SetWriteDeadline(t time.Time) error {
	c.setWrite(t)
	return c.Conn.SetWriteDeadline(t)
}

// SetReadDeadline sets t, no later than a probe connection's window.
func (c *limitConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.readLimit(t))
}

// SetDeadline sets both deadlines, as SetReadDeadline and
// SetWriteDeadline do.
func (c *limitConn) SetDeadline(t time.Time) error {
	c.setWrite(t)
	return errors.Join(c.Conn.SetWriteDeadline(t), c.Conn.SetReadDeadline(c.readLimit(t)))
}

func (c *limitConn) setWrite(t time.Time) {
	if t.IsZero() {
		c.deadline.Store(0)
		return
	}
	c.deadline.Store(t.UnixNano())
}

func (c *limitConn) readLimit(t time.Time) time.Time {
	if c.probe && (t.IsZero() || t.After(c.readBy)) {
		return c.readBy
	}
	return t
}

// CloseWrite shuts the writing side down when the connection can (TCP):
// the server sends it before closing a connection after an answer with
// Connection: close.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// probeConnKey is the context key that marks the requests of a probe
// connection (connContext).
type probeConnKey struct{}

// connContext marks the context of a probe connection's requests.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitConn); ok && lc.probe {
		return context.WithValue(ctx, probeConnKey{}, true)
	}
	return ctx
}

// onProbeConn reports whether r came on a probe connection.
func onProbeConn(r *http.Request) bool {
	v, _ := r.Context().Value(probeConnKey{}).(bool)
	return v
}
