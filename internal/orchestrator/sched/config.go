package sched

import (
	"cmp"
	"errors"
	"math"
	"time"
)

// Defaults of Config.
const (
	// MarginDefault is the window's margin over the tool's slots, as a
	// fraction of them: with 64 slots the window is 80 calls, so the
	// workers find the next calls queued when a slot frees while
	// JetStream holds only about the next round.
	MarginDefault = 0.25
	// MinMarginDefault is the least margin, in calls, of a tool's window.
	MinMarginDefault = 4
	// MaxKeysDefault bounds the keys of one tool in a Snapshot.
	MaxKeysDefault = 20
	// IdleKeyTTL is how long a key with nothing waiting or in flight is
	// kept (its served count, its rate, its token bucket) before the
	// scheduler forgets it.
	IdleKeyTTL = time.Minute
	// StaleFactor and StaleMinDefault say when a call granted long ago
	// stops counting against its tool's window (it still counts against
	// its key's cap): after StaleFactor times the tool's average time from
	// grant to release, at least Config.StaleMin (ten times that before
	// any call of the tool was released). Such a call is most likely
	// waiting out a retry's backoff in JetStream, taking no worker's slot;
	// counting it would leave the workers idle while the window holds
	// calls that cannot run.
	StaleFactor     = 4
	StaleMinDefault = 100 * time.Millisecond
)

// Clock is the scheduler's time: Now, and a timer for keys out of rate.
// The default is the system clock; tests inject their own.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d; stop prevents that
	// if it has not happened yet.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// Config configures a Scheduler. The zero value takes every default.
type Config struct {
	// Margin is a tool's window over its slots, as a fraction of the
	// slots (at least MinMargin calls). Default MarginDefault; negative:
	// no margin (the window is the slots).
	Margin float64
	// MinMargin is the least margin of a window, in calls. Default
	// MinMarginDefault; negative: none.
	MinMargin int
	// MaxKeys bounds the keys listed per tool in a Snapshot; the rest are
	// summed under OtherKey. Default MaxKeysDefault.
	MaxKeys int
	// StaleMin is the least time after its grant a call goes stale (see
	// StaleFactor). Default StaleMinDefault; negative: grants never go
	// stale.
	StaleMin time.Duration
	// Clock is the scheduler's time. Default the system clock.
	Clock Clock
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Margin = cmp.Or(c.Margin, MarginDefault)
	c.MinMargin = cmp.Or(c.MinMargin, MinMarginDefault)
	c.MaxKeys = cmp.Or(c.MaxKeys, MaxKeysDefault)
	c.StaleMin = cmp.Or(c.StaleMin, StaleMinDefault)
	if c.Clock == nil {
		c.Clock = systemClock{}
	}
	return c
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.Margin) || math.IsInf(c.Margin, 0):
		return errors.New("sched: Config.Margin must be a finite number")
	case c.MaxKeys <= 0:
		return errors.New("sched: Config.MaxKeys must be positive")
	case c.Clock == nil:
		return errors.New("sched: Config.Clock is nil")
	}
	return nil
}
