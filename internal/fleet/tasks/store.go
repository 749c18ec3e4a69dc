package tasks

import (
	"context"
	"time"

	js "github.com/nats-io/nats.go/jetstream"
)

// Store is one replica's view of the tasks bucket: it creates tasks, runs
// the ones it owns, answers any task of the bucket, and adopts the tasks
// whose owner's lease lapsed. It is safe for concurrent use.
type Store struct {
	cfg Config
	kv  js.KeyValue
}

// Open binds the bucket (creating it when it does not exist) and starts
// the watch that learns of cancellations and lapsed leases. Stop ends it.
func Open(ctx context.Context, j js.JetStream, cfg Config) (*Store, error) {
	panic("TODO")
}

// Start records a task for req and runs its calls in the background on
// this replica. It returns once the dispatcher admitted the turn: a turn
// refused for saturation is not recorded, and the *dispatch.SaturatedError
// is returned. A request that does not fit a record is ErrTooLarge.
func (s *Store) Start(ctx context.Context, req Request) (Task, error) {
	panic("TODO")
}

// Get returns the task id of tenant; ErrNotFound when there is none (or it
// is another tenant's).
func (s *Store) Get(ctx context.Context, tenant, id string) (Task, error) {
	panic("TODO")
}

// Wait is Get once the task is no longer working, or once d (capped by
// Config.MaxWait) has passed or ctx is done, whichever comes first.
func (s *Store) Wait(ctx context.Context, tenant, id string, d time.Duration) (Task, error) {
	panic("TODO")
}

// Cancel cancels the task id of tenant: a working task becomes cancelled
// and its calls are cancelled pool-wide by its owner; a task that already
// ended is returned as it is.
func (s *Store) Cancel(ctx context.Context, tenant, id string) (Task, error) {
	panic("TODO")
}

// Stop is the replica leaving: Start fails with ErrStopped; the tasks it
// runs may finish until ctx is done; those still working are then handed
// over (their lease released) for another replica to adopt. Stop the
// dispatcher after the store: the turns handed over end with it, and
// their calls are not cancelled.
func (s *Store) Stop(ctx context.Context) error {
	panic("TODO")
}
