package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Defaults of Options.
const (
	ListenDefault       = "127.0.0.1:4222"
	DataDirDefault      = "data"
	ServerNameDefault   = "toolpool"
	MaxPayloadDefault   = 8 << 20 // 8 MiB
	ReadyTimeoutDefault = 10 * time.Second
)

// ErrListenAddrInUse matches (with errors.Is) the error Start
// returns when its listen address is taken, typically by another server.
var ErrListenAddrInUse = errors.New("listen address is in use")

// Options configures an in-process nats-server with JetStream.
type Options struct {
	// Listen is the client address, host:port. Port 0 or -1 picks a free
	// port (see ClientURL); an empty host listens on all interfaces.
	// Default ListenDefault (127.0.0.1:4222).
	Listen string
	// DataDir holds the server's state; JetStream stores streams in
	// DataDir/jetstream. Default DataDirDefault ("data", relative
	// to the working directory).
	DataDir string
	// ServerName names the server in logs and monitoring.
	// Default ServerNameDefault ("toolpool").
	ServerName string
	// Logger receives the server's log: warnings and errors at their
	// levels, notices and debug lines at debug level. Default slog.Default().
	Logger *slog.Logger
	// User and Password, when User is set, are required of every client.
	// Set them when Listen is not a loopback address.
	User, Password string
	// MaxPayload is the largest message the server accepts, in bytes. It
	// must be at least Config.MaxMsgSize plus headers.
	// Default MaxPayloadDefault (8 MiB).
	MaxPayload int32
	// ReadyTimeout bounds the wait for the server to accept clients.
	// Default ReadyTimeoutDefault (10s).
	ReadyTimeout time.Duration
	// MaxStore, when positive, caps JetStream's file store in bytes; writes
	// past it fail. Default 0: the server's own limit (most of the free
	// disk space).
	MaxStore int64
}

// WithDefaults returns o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	if o.Listen == "" {
		o.Listen = ListenDefault
	}
	if o.DataDir == "" {
		o.DataDir = DataDirDefault
	}
	if o.ServerName == "" {
		o.ServerName = ServerNameDefault
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = MaxPayloadDefault
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = ReadyTimeoutDefault
	}
	return o
}

// Server is a running in-process nats-server with JetStream.
type Server struct {
	srv      *server.Server
	url      string
	storeDir string
	lock     *storeLock
	once     sync.Once
}

// Start starts nats-server in this process with JetStream enabled,
// storing under opts.DataDir/jetstream, and returns once it accepts
// clients. Zero fields of opts take their defaults. A taken listen address
// gives an error matching ErrListenAddrInUse.
//
// The server holds DataDir/toolpool.lock (StoreLockFile) locked until
// Shutdown: a second process starting an embedded server on the same data
// directory gets an error matching ErrDataDirInUse that names the holder,
// instead of a second server corrupting the store.
func Start(opts Options) (*Server, error) {
	opts = opts.WithDefaults()
	host, port, err := parseListen(opts.Listen)
	if err != nil {
		return nil, err
	}
	dataDir, err := opts.check()
	if err != nil {
		return nil, err
	}
	lock, err := lockStore(dataDir)
	if err != nil {
		return nil, err
	}
	if port != server.RANDOM_PORT {
		// Probe the address: the server itself only logs a listen failure,
		// and this gives a typed error the CLI can explain. (After the
		// lock: a second orchestrator started by mistake learns about the
		// data dir, the cause, not only about the port.)
		if err := probeListen(host, port); err != nil {
			lock.unlock()
			return nil, err
		}
	}
	srv, err := run(opts, host, port, dataDir)
	if err != nil {
		lock.unlock()
		return nil, err
	}
	clientPort := port
	if a, ok := srv.Addr().(*net.TCPAddr); ok {
		clientPort = a.Port
	}
	return &Server{
		srv:      srv,
		url:      "nats://" + net.JoinHostPort(clientHost(host), strconv.Itoa(clientPort)),
		storeDir: filepath.Join(dataDir, server.JetStreamStoreDir),
		lock:     lock,
	}, nil
}

// check names the first bad field of opts (with its defaults) and returns
// the absolute data directory.
func (o Options) check() (dataDir string, err error) {
	if o.MaxPayload < 0 {
		return "", fmt.Errorf("jetstream: embedded nats-server: MaxPayload is %d; want a positive size", o.MaxPayload)
	}
	if o.ReadyTimeout < 0 {
		return "", fmt.Errorf("jetstream: embedded nats-server: ReadyTimeout is %v; want a positive duration", o.ReadyTimeout)
	}
	dataDir, err = filepath.Abs(o.DataDir)
	if err != nil {
		return "", fmt.Errorf("jetstream: embedded nats-server: data dir %s: %w", o.DataDir, err)
	}
	return dataDir, nil
}

// run starts nats-server with JetStream on host:port, storing under
// dataDir, and waits until it accepts clients; a server that does not is
// shut down.
func run(opts Options, host string, port int, dataDir string) (*server.Server, error) {
	srv, err := server.NewServer(&server.Options{
		ServerName:        opts.ServerName,
		Host:              host,
		Port:              port,
		JetStream:         true,
		StoreDir:          dataDir,
		MaxPayload:        opts.MaxPayload,
		JetStreamMaxStore: opts.MaxStore,
		Username:          opts.User,
		Password:          opts.Password,
		NoSigs:            true,
	})
	if err != nil {
		return nil, fmt.Errorf("jetstream: embedded nats-server: %w", err)
	}
	logger := &serverLogger{log: opts.Logger}
	srv.SetLoggerV2(logger, opts.Logger.Enabled(context.Background(), slog.LevelDebug), false, false)

	// Start returns after JetStream is enabled and the client listener is
	// open, or after logging a fatal error (which our logger records).
	srv.Start()
	if msg := logger.fatal(); msg != "" {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("jetstream: embedded nats-server did not start: %s", msg)
	}
	if !srv.ReadyForConnections(opts.ReadyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		if msg := logger.fatal(); msg != "" {
			return nil, fmt.Errorf("jetstream: embedded nats-server did not start: %s", msg)
		}
		return nil, fmt.Errorf("jetstream: embedded nats-server on %s not ready for connections after %v", opts.Listen, opts.ReadyTimeout)
	}
	return srv, nil
}

// ClientURL is the URL clients in this or other processes connect to,
// e.g. nats://127.0.0.1:4222. A server listening on all interfaces is
// reached through loopback.
func (e *Server) ClientURL() string { return e.url }

// StoreDir is the directory holding JetStream's data: DataDir/jetstream.
func (e *Server) StoreDir() string { return e.storeDir }

// Server is the underlying nats-server, for what this type does not cover.
func (e *Server) Server() *server.Server { return e.srv }

// Shutdown stops the server and waits until it has closed its clients and
// flushed and closed its stores, then releases the data directory's lock.
// It is safe to call more than once.
func (e *Server) Shutdown() {
	e.once.Do(func() {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
		e.lock.unlock()
	})
}

// parseListen splits host:port; port 0 or -1 becomes server.RANDOM_PORT.
func parseListen(listen string) (string, int, error) {
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("jetstream: embedded nats-server: listen address %q: want host:port, e.g. 127.0.0.1:4222", listen)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("jetstream: embedded nats-server: listen address %q: port must be a number from 0 to 65535 (0 or -1 picks a free one)", listen)
	}
	if port == 0 || port == -1 {
		port = server.RANDOM_PORT
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

func probeListen(host string, port int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("jetstream: embedded nats-server cannot listen on %s: %w (is another nats-server or orchestrator running? choose another address)",
				addr, ErrListenAddrInUse)
		}
		return fmt.Errorf("jetstream: embedded nats-server cannot listen on %s: %w", addr, err)
	}
	return l.Close()
}

// clientHost is the host clients dial to reach a server listening on host.
func clientHost(host string) string {
	ip := net.ParseIP(host)
	switch {
	case ip == nil || !ip.IsUnspecified():
		return host
	case ip.To4() != nil:
		return "127.0.0.1"
	default:
		return "::1"
	}
}

// serverLogger adapts nats-server's logger to slog and remembers the first
// fatal error (the server logs those instead of returning them).
type serverLogger struct {
	log      *slog.Logger
	mu       sync.Mutex
	fatalMsg string
}

func (l *serverLogger) logf(level slog.Level, format string, v []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, fmt.Sprintf(format, v...), slog.String("component", "nats-server"))
}

func (l *serverLogger) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatalMsg
}

func (l *serverLogger) Noticef(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }
func (l *serverLogger) Warnf(format string, v ...any)   { l.logf(slog.LevelWarn, format, v) }
func (l *serverLogger) Errorf(format string, v ...any)  { l.logf(slog.LevelError, format, v) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.logf(slog.LevelDebug, format, v) }
func (l *serverLogger) Tracef(string, ...any)           {}

// Fatalf records the first fatal error; unlike the server's own logger it
// does not exit the process.
func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.mu.Lock()
	if l.fatalMsg == "" {
		l.fatalMsg = msg
	}
	l.mu.Unlock()
	l.log.Error(msg, slog.String("component", "nats-server"))
}
