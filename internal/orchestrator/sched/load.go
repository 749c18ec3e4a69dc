package sched

// Load is what a tool's scheduler holds, and of it one key's part.
type Load struct {
	// Waiting and InFlight are the tool's calls waiting and granted;
	// Window its window (0: none).
	Waiting, InFlight, Window int
	// KeyWaiting and KeyInFlight are the key's.
	KeyWaiting, KeyInFlight int
	// Keys counts the keys with calls waiting or in flight, the key
	// counted even when it has none: the number the tool's slots are
	// shared between.
	Keys int
}

// Load returns what the scheduler holds of tool, and of its key key of
// tenant: what admission control weighs a new call against.
func (s *Scheduler) Load(tool, tenant, key string) Load {
	s.mu.RLock()
	t := s.tools[tool]
	s.mu.RUnlock()
	if t == nil {
		return Load{Keys: 1}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l := Load{Waiting: t.waiting, InFlight: t.inFlight, Window: t.window, Keys: t.busyKeys}
	if k := t.keys[keyID{tenant, key}]; k != nil && k.waiting+k.inFlight > 0 {
		l.KeyWaiting, l.KeyInFlight = k.waiting, k.inFlight
	} else {
		l.Keys++
	}
	return l
}
