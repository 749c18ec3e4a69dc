package natstest_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/toolpool/toolpool/internal/natstest"
)

// TestFreePortsBelowTheEphemeralRange: where the kernel's ephemeral port
// range can be read (Linux), FreePorts picks below it, in [LowPort, the
// range's start), where outgoing connections and Listen(":0") never take
// a port; the ports are distinct, free on 127.0.0.1 right after, and
// locked for the test.
func TestFreePortsBelowTheEphemeralRange(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(natstest.PortRangeFile)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s does not exist (not Linux): the kernel chooses the ports, as TestFreePortsFallback shows", natstest.PortRangeFile)
	}
	if err != nil {
		t.Fatal(err)
	}
	var start, end int
	if _, err := fmt.Sscan(string(data), &start, &end); err != nil {
		t.Fatalf("%s: %q: %v", natstest.PortRangeFile, data, err)
	}
	picks := start-natstest.LowPort >= natstest.MinSpan
	if got := natstest.NewAllocator(natstest.PortRangeFile, t.TempDir()).PicksItself(); got != picks {
		t.Errorf("ephemeral range %d–%d: FreePorts picks its ports itself %v, want %v", start, end, got, picks)
	}

	got := natstest.FreePorts(t, 50)
	checkDistinct(t, got)
	checkBindable(t, got)
	if picks {
		for _, p := range got {
			if p < natstest.LowPort || p >= start {
				t.Errorf("port %d; want it in [%d, %d), below the ephemeral range %d–%d", p, natstest.LowPort, start, start, end)
			}
		}
	} else {
		t.Logf("ephemeral range %d–%d leaves fewer than %d ports above %d: the kernel chooses", start, end, natstest.MinSpan, natstest.LowPort)
	}
	if natstest.HaveLocks {
		checkLocked(t, natstest.DefaultLockDir(), got, true)
	}
}

// TestFreePortsRangeFromTheFile: the range's start is read from the file
// (here one well below Linux's default); the ports lie below it and are
// distinct across calls, free and locked.
func TestFreePortsRangeFromTheFile(t *testing.T) {
	t.Parallel()
	const start = 24000
	file := filepath.Join(t.TempDir(), "ip_local_port_range")
	if err := os.WriteFile(file, []byte(fmt.Sprintf("%d\t60999\n", start)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The locks in FreePorts' own directory: no other test binary hands
	// out these ports while this test checks them.
	a := natstest.NewAllocator(file, natstest.DefaultLockDir())
	if !a.PicksItself() {
		t.Fatalf("range %d–60999: the allocator does not pick its ports itself", start)
	}
	got := append(a.Take(t, 100), a.Take(t, 100)...)
	checkDistinct(t, got)
	checkBindable(t, got)
	for _, p := range got {
		if p < natstest.LowPort || p >= start {
			t.Errorf("port %d; want it in [%d, %d)", p, natstest.LowPort, start)
		}
	}
	if natstest.HaveLocks {
		checkLocked(t, natstest.DefaultLockDir(), got, true)
	}
}

// TestFreePortsFallback: without a readable range, or with too few ports
// between LowPort and its start, the allocator does not pick its ports
// itself (the kernel chooses: Listen on port 0); the ports are still
// distinct across calls, and locked until the test ends.
func TestFreePortsFallback(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		name, content string // no content: no file
		picksItself   bool
	}{
		{name: "no file"},
		{name: "empty", content: "\n"},
		{name: "garbled", content: "abc def\n"},
		{name: "one word", content: "ephemeral\n"},
		{name: "one number", content: "32768\n"},
		{name: "three numbers", content: "32768 60999 1\n"},
		{name: "out of range", content: "70000\t80000\n"},
		{name: "too high", content: "20500\t60999\n"},
		{name: "all ports ephemeral", content: "1024\t65535\n"},
		{name: "one port too few", content: fmt.Sprintf("%d\t60999\n", natstest.LowPort+natstest.MinSpan-1)},
		// The boundary, on the other side: the allocator picks itself.
		{name: "just enough", content: fmt.Sprintf("%d\t60999\n", natstest.LowPort+natstest.MinSpan), picksItself: true},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		if c.content != "" {
			if err := os.WriteFile(file, []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		locks := t.TempDir()
		a := natstest.NewAllocator(file, locks)
		if a.PicksItself() != c.picksItself {
			t.Errorf("%s (%q): picks itself %v, want %v", c.name, c.content, a.PicksItself(), c.picksItself)
		}
		var got []int
		t.Run(c.name, func(t *testing.T) {
			got = append(a.Take(t, 20), a.Take(t, 20)...)
			checkDistinct(t, got)
			if natstest.HaveLocks {
				checkLocked(t, locks, got, true)
			}
		})
		if natstest.HaveLocks && len(got) > 0 { // the subtest's cleanup released them
			checkLocked(t, locks, got, false)
		}
	}
}

// checkDistinct checks that no port is in ports twice.
func checkDistinct(t *testing.T, ports []int) {
	t.Helper()
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Errorf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

// checkBindable checks that each port can be bound on 127.0.0.1 now.
func checkBindable(t *testing.T, ports []int) {
	t.Helper()
	for _, p := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Errorf("port %d: %v", p, err)
			continue
		}
		_ = l.Close()
	}
}

// checkLocked checks whether the ports' locks in dir are held by another
// open file (this test's allocator): a lock of the same file opened again
// fails while one is held, in the same process too
// (TestLockPortPerOpenFile).
func checkLocked(t *testing.T, dir string, ports []int, held bool) {
	t.Helper()
	for _, p := range ports {
		unlock, ok, err := natstest.LockPort(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			unlock()
		}
		if ok == held {
			t.Errorf("port %d: lock held %v, want %v", p, !ok, held)
		}
	}
}
