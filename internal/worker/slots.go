package worker

import "sync"

// slots counts a worker's concurrency slots. Calls take one to run; the
// pull loops ask how many are free before they pull, so that a worker holds
// no more calls than it can start.
//
// A call that finds no free slot (several tools pulled for the same free
// slots at once) queues for one; a slot put back goes to the longest
// queued call first, and only then counts as free for the pull loops. A
// call never waits in a buffer the worker cannot see: it either runs or
// waits in acquire, which keeps its message alive.
type slots struct {
	mu    sync.Mutex
	free  int
	queue []chan struct{} // calls waiting for a slot, oldest first
	freed chan struct{}   // closed when a slot becomes free; nil when nobody waits
}

func newSlots(n int) *slots { return &slots{free: n} }

// take takes a free slot if there is one and no call is queued for it.
func (s *slots) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free > 0 && len(s.queue) == 0 {
		s.free--
		return true
	}
	return false
}

// wait queues for a slot. The returned channel receives when the slot is
// handed over; a caller that stops waiting calls cancel with it.
func (s *slots) wait() chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free > 0 && len(s.queue) == 0 {
		s.free--
		ch <- struct{}{}
		return ch
	}
	s.queue = append(s.queue, ch)
	return ch
}

// cancel leaves the queue. When the slot was handed over in the meantime,
// it is put back.
func (s *slots) cancel(ch chan struct{}) {
	s.mu.Lock()
	for i, q := range s.queue {
		if q == ch {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			s.mu.Unlock()
			return
		}
	}
	s.mu.Unlock()
	<-ch // handed over: give it back
	s.put()
}

// put gives a slot back: to the oldest queued call, or to the free ones.
func (s *slots) put() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 {
		ch := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		ch <- struct{}{}
		return
	}
	s.free++
	if s.freed != nil {
		close(s.freed)
		s.freed = nil
	}
}

// available reports how many slots are free for pulling. When none is, it
// also returns a channel that is closed when one becomes free.
func (s *slots) available() (int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free > 0 && len(s.queue) == 0 {
		return s.free, nil
	}
	if s.freed == nil {
		s.freed = make(chan struct{})
	}
	return 0, s.freed
}
