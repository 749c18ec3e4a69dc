package kvwatch

import (
	"testing"
	"time"
)

func TestWakes(t *testing.T) {
	var w Wakes
	a, releaseA := w.Hold("k")
	b, releaseB := w.Hold("k")
	other, releaseOther := w.Hold("other")
	w.Wake("k")
	for _, ch := range []<-chan struct{}{a, b} {
		select {
		case <-ch:
		case <-time.After(time.Second):
			t.Fatal("a caller of k was not woken")
		}
	}
	select {
	case <-other:
		t.Fatal("a caller of another key was woken")
	default:
	}
	releaseA()
	releaseB()
	// A hold after the wake waits for the next change.
	c, releaseC := w.Hold("k")
	select {
	case <-c:
		t.Fatal("a new hold must wait for the next change")
	default:
	}
	releaseC()
	releaseOther()
	if len(w.m) != 0 {
		t.Fatalf("released holds left %d keys behind", len(w.m))
	}
	w.Wake("nobody") // no caller: nothing to do
}
