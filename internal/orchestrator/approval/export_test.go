package approval

// Waiters is how many approvals have Waits registered on s.
func Waiters(s *Store) int {
	return s.wakes.Len()
}

// PendingSeen is how many pending approvals s's watch knows of.
func PendingSeen(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}
