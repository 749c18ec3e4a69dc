package worker

import "testing"

func TestSlotsHandOverOldestFirst(t *testing.T) {
	s := newSlots(1)
	if n, _ := s.available(); n != 1 {
		t.Fatalf("available = %d; want 1 free", n)
	}
	if !s.take() {
		t.Fatal("take on a free slot failed")
	}
	if s.take() {
		t.Fatal("take succeeded with no slot free")
	}
	n, freed := s.available()
	if n != 0 || freed == nil {
		t.Fatalf("available = %d, %v; want 0 and a channel", n, freed)
	}
	first, second := s.wait(), s.wait()

	s.put() // to the first queued call, not to the pull loops
	select {
	case <-first:
	default:
		t.Fatal("the oldest queued call did not get the slot put back")
	}
	select {
	case <-second:
		t.Fatal("the second queued call got a slot that was not put back")
	case <-freed:
		t.Fatal("a slot handed to a queued call was announced as free")
	default:
	}
	if s.take() {
		t.Fatal("take jumped the queue")
	}

	// The second call gives up; the first one's slot then frees for pulling.
	s.cancel(second)
	s.put()
	select {
	case <-freed:
	default:
		t.Fatal("a slot put back with nobody queued was not announced")
	}
	if n, _ := s.available(); n != 1 {
		t.Fatalf("available = %d after the last put, want 1", n)
	}
}

// A call that gives up after its slot was handed over gives the slot back.
func TestSlotsCancelAfterHandOver(t *testing.T) {
	s := newSlots(1)
	s.take()
	ch := s.wait()
	s.put() // handed to ch
	s.cancel(ch)
	if !s.take() {
		t.Fatal("the slot handed to a call that gave up was lost")
	}
}
