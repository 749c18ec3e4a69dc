package dlq

import (
	"context"
	"errors"
)

// Seqs returns the sequences of the dead letters f selects, oldest first
// (see Scan).
func (s *Store) Seqs(ctx context.Context, f Filter) ([]uint64, error) {
	var seqs []uint64
	err := s.Scan(ctx, f, func(l *Letter) error {
		seqs = append(seqs, l.Seq)
		return nil
	})
	return seqs, err
}

// GetAll returns the dead letters at seqs, in that order, and the
// sequences that hold none (never did, or replayed or purged meanwhile).
func (s *Store) GetAll(ctx context.Context, seqs []uint64) (letters []*Letter, missing []uint64, err error) {
	for _, seq := range seqs {
		l, err := s.Get(ctx, seq)
		if errors.Is(err, ErrNotFound) {
			missing = append(missing, seq)
			continue
		}
		if err != nil {
			return letters, missing, err
		}
		letters = append(letters, l)
	}
	return letters, missing, nil
}

// DeleteSeqs removes the dead letters at seqs, skipping those gone
// meanwhile, and returns how many it removed, also when it stops at an
// error.
func (s *Store) DeleteSeqs(ctx context.Context, seqs []uint64) (int, error) {
	n := 0
	for _, seq := range seqs {
		err := s.Delete(ctx, seq)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
