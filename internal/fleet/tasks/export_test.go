package tasks

// Runs reports whether s runs the task id (it owns it).
func Runs(s *Store, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.running[id]
	return ok
}

// Waiters is how many tasks have Waits registered.
func Waiters(s *Store) int {
	return s.wakes.Len()
}
