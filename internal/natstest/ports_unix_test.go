//go:build unix

package natstest_test

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/toolpool/toolpool/internal/natstest"
	"github.com/toolpool/toolpool/internal/proctest"
)

// TestLockPortPerOpenFile: a flock belongs to its open file, so a second
// open and lock of a port's file fails while the first holds it, in the
// same process too (what the tests' checks of a held lock rely on), and
// succeeds once the first is released.
func TestLockPortPerOpenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	unlock, ok, err := natstest.LockPort(dir, 20001)
	if err != nil || !ok {
		t.Fatalf("first lock: ok %v, err %v; want it taken", ok, err)
	}
	if again, ok, err := natstest.LockPort(dir, 20001); err != nil || ok {
		if ok {
			again()
		}
		t.Fatalf("second lock while the first is held: ok %v, err %v; want it refused", ok, err)
	}
	other, ok, err := natstest.LockPort(dir, 20002)
	if err != nil || !ok {
		t.Fatalf("lock of another port: ok %v, err %v; want it taken", ok, err)
	}
	other()
	unlock()
	again, ok, err := natstest.LockPort(dir, 20001)
	if err != nil || !ok {
		t.Fatalf("lock once the first was released: ok %v, err %v; want it taken", ok, err)
	}
	again()
}

// TestLockedPortIsNotHandedOut: a port whose lock another process holds
// is never handed out, however free it is; once that process is killed,
// its ports are handed out again (nothing stale remains). A port handed
// out is locked until its test ends.
//
// Not parallel: a child process forked while another test holds a lock
// holds it too, until its exec closes the inherited (close-on-exec)
// files, so the other tests' checks that a lock was released would fail
// now and then. The parallel tests start once this one has ended.
func TestLockedPortIsNotHandedOut(t *testing.T) {
	// 16 free ports, locked by this test in FreePorts' directory so that
	// no other test binary takes them; the allocators below lock in a
	// directory of their own.
	ports := natstest.FreePorts(t, 16)
	locked, free := ports[:12], slices.Sorted(slices.Values(ports[12:]))
	dir := t.TempDir()
	args := []string{dir}
	for _, p := range locked {
		args = append(args, strconv.Itoa(p))
	}
	holder := proctest.Command{
		Name: "lock holder", Path: os.Args[0], Args: args,
		Env: append(os.Environ(), childEnv+"=lock"),
	}.Start(t)
	holder.WaitFor("locked", time.Minute)
	checkLocked(t, dir, locked, true)

	// Of the 16 candidates only the 4 the holder does not lock are handed
	// out (a fifth would not be: Take would try 500 times, then fail).
	got := natstest.NewAllocatorOf(ports, dir).Take(t, len(free))
	slices.Sort(got)
	if !slices.Equal(got, free) {
		t.Errorf("handed out %v; want %v, the ports no other process holds (of %v)", got, free, ports)
	}
	checkLocked(t, dir, free, true)

	holder.Kill() // and waits until it has exited
	want := slices.Sorted(slices.Values(locked))
	t.Run("after the holder died", func(t *testing.T) {
		got := natstest.NewAllocatorOf(locked, dir).Take(t, len(locked))
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("handed out %v; want %v", got, want)
		}
		checkLocked(t, dir, want, true)
	})
	// The subtest's cleanup released its locks; the first allocator's
	// are held until this test ends.
	checkLocked(t, dir, want, false)
	checkLocked(t, dir, free, true)
}
