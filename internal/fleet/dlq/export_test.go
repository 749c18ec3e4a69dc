package dlq

// Sweeps is the number of sweeps w finished, for the tests.
func (w *PoisonWatcher) Sweeps() int64 { return w.sweeps.Load() }
