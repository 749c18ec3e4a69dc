package natstest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Ports for a test's processes. FreePorts hands out a port number that a
// process the test starts binds later, so something else may take the
// port in between. Two things did (a CI run failed with "bind: address
// already in use"):
//
//   - The kernel: a port from Listen("127.0.0.1:0") lies in the ephemeral
//     range, from which every outgoing connection on the machine takes its
//     source port and every other Listen(":0") its port. Ports below that
//     range are never given out that way, so FreePorts picks them there at
//     random: [lowPort, the range's start), 12,768 ports with Linux's
//     default range (32768–60999).
//   - Another test process picking the same port: each port handed out is
//     locked (a flock on a file per port) until the test ends, and a port
//     another process holds is not handed out. The kernel drops a lock
//     when its process dies, so a killed test leaves no port blocked.
//
// The callers' processes all bind 127.0.0.1, so that is where a port is
// checked free; a listener on the wildcard address (0.0.0.0 or a
// dual-stack [::]) holding the port fails the check too.
//
// Where the ephemeral range cannot be read (a system other than Linux),
// or leaves fewer than minSpan ports above lowPort, the kernel chooses as
// before (Listen("127.0.0.1:0")); the ports are still locked where flock
// exists.
const (
	// portRangeFile holds the start and the end of Linux's ephemeral
	// port range.
	portRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"
	// lowPort is the lowest port picked outside the ephemeral range.
	// Below 20000 lie the defaults of services a developer's machine may
	// start while the tests run (5432, 6379, 8080, 9090, 11211, 15672,
	// Jaeger's 14250/16686, ...); a service already running is detected,
	// one started after the check is not.
	lowPort = 20000
	// minSpan is the fewest ports between lowPort and the ephemeral range
	// for FreePorts to pick there: a test binary takes up to a few hundred
	// over its run, and a pick that another process holds is tried again.
	minSpan = 1024
)

// allocator hands out ports, each once.
type allocator struct {
	// pick returns a candidate port; nil: ask the kernel for one.
	pick func() int
	// lockDir holds a lock file per port; "" when the system has no
	// flock.
	lockDir string

	mu     sync.Mutex
	handed map[int]bool // the ports this allocator handed out
}

// portAllocator is the allocator of FreePorts and FreeAddr: one per
// process, so a port is handed out once in a test binary (FreeAddr for
// HTTP, then for NATS, never name the same port).
var portAllocator = sync.OnceValue(func() *allocator {
	return newAllocator(portRangeFile, defaultLockDir())
})

// defaultLockDir is the directory of the lock files, one per user (a
// directory that another user created would not let this one create
// files in it).
func defaultLockDir() string {
	if !haveLocks {
		return ""
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("toolpool-natstest-ports-%d", os.Getuid()))
}

// newAllocator returns an allocator that picks below the ephemeral range
// that rangeFile gives, or asks the kernel when it cannot (see minSpan).
func newAllocator(rangeFile, lockDir string) *allocator {
	a := &allocator{lockDir: lockDir, handed: map[int]bool{}}
	if start, ok := ephemeralStart(rangeFile); ok && start-lowPort >= minSpan {
		a.pick = func() int { return lowPort + rand.IntN(start-lowPort) }
	}
	return a
}

// ephemeralStart reads the start of the ephemeral port range from the
// file, as Linux writes it ("32768\t60999\n").
func ephemeralStart(path string) (int, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(data))
	if len(fields) != 2 {
		return 0, false
	}
	start, err := strconv.Atoi(fields[0])
	if err != nil || start < 1 || start > 65535 {
		return 0, false
	}
	return start, true
}

// take returns n distinct ports that were free a moment ago, that this
// allocator never returned before, and that no other process holds the
// lock of. Their locks are released when t ends.
func (a *allocator) take(t testing.TB, n int) []int {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	var held []net.Listener // the kernel's choices, held until all are made: distinct
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	got := make([]int, 0, n)
	for tries := 0; len(got) < n; tries++ {
		if tries > 100*n {
			t.Fatalf("natstest: no free loopback port after %d tries", tries)
		}
		var port int
		if a.pick == nil {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
			port = l.Addr().(*net.TCPAddr).Port
		} else {
			port = a.pick()
		}
		if a.handed[port] {
			continue
		}
		unlock, ok := func() {}, true
		if a.lockDir != "" {
			var err error
			if unlock, ok, err = lockPort(a.lockDir, port); err != nil {
				t.Fatalf("natstest: lock of port %d: %v", port, err)
			}
		}
		if !ok { // another process's
			continue
		}
		if a.pick != nil && !bindable(port) { // checked once locked: no other test takes it now
			unlock()
			continue
		}
		a.handed[port] = true
		t.Cleanup(unlock)
		got = append(got, port)
	}
	return got
}

// bindable reports whether a listener can bind 127.0.0.1:port now.
func bindable(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// FreePorts returns n distinct loopback ports that were free a moment
// ago, that no earlier call in this process returned, and that no other
// process of these tests holds until t ends. On Linux they lie below the
// kernel's ephemeral port range, which outgoing connections and
// Listen(":0") draw from, so only a process that names the port itself
// can take it before the test's process binds it.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	return portAllocator().take(t, n)
}

// FreeAddr returns a loopback address (127.0.0.1:port) whose port
// FreePorts chose.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePorts(t, 1)[0])
}
