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

// errPageFull stops the Scan of a Page.
var errPageFull = errors.New("dlq: page full")

// Page returns at most limit of the dead letters f selects, oldest first,
// and whether more follow: the next page is f with After set to the last
// letter's Seq. It reads from f.After on, on the server, and stops at the
// first letter past the page, so a page of a large TOOL_DLQ costs about
// the letters it reads (all of them between After and the page's end when
// the filter matches few).
func (s *Store) Page(ctx context.Context, f Filter, limit int) (letters []*Letter, more bool, err error) {
	if limit < 1 {
		return nil, false, errors.New("dlq: Page: limit must be at least 1")
	}
	err = s.Scan(ctx, f, func(l *Letter) error {
		if len(letters) == limit {
			more = true
			return errPageFull
		}
		letters = append(letters, l)
		return nil
	})
	if errors.Is(err, errPageFull) {
		err = nil
	}
	return letters, more, err
}
