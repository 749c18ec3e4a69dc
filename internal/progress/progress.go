// Package progress draws the one-line progress bar of the toolpool
// commands (orchestrator bench, orchestrator dlq replay) on a terminal.
//
//	bar := progress.New(progress.Terminal(stderr), progress.Config{Label: "replay", Total: len(seqs), Unit: "letters"})
//	bar.Start()
//	for ... { bar.Printf(stdout, "replayed %d\n", seq); bar.Add(1) }
//	bar.Finish()
//
// A nil *Bar (New with a nil writer) draws nothing; every method works on
// it, so callers do not check.
package progress

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolpool/toolpool/internal/infra/startstop"
)

// width is the bar's width in characters.
const width = 30

// redraw is how often a started bar is redrawn.
const redraw = 200 * time.Millisecond

// Config describes what a bar counts.
type Config struct {
	// Label names what runs, printed before the bar. Default "".
	Label string
	// Total is how many steps make the whole; 0 with Duration.
	Total int
	// Duration is how long the work runs, when it is not a number of
	// steps (Total 0).
	Duration time.Duration
	// Unit names the steps: "calls". Default "done".
	Unit string
}

// Bar is a one-line progress bar: label, bar, percentage, count, rate and,
// for a number of steps, the time left. It is safe for concurrent use.
type Bar struct {
	w     io.Writer
	cfg   Config
	start time.Time
	n     atomic.Int64

	// life runs the redrawing from Start to Finish.
	life startstop.Base

	mu       sync.Mutex // drawing, and the lines written around the bar
	finished bool       // the last line is drawn: nothing clears it any more
}

// Terminal returns w when it is a terminal (a character device), nil
// otherwise: a bar is drawn only where a person watches.
func Terminal(w io.Writer) io.Writer {
	if IsTerminal(w) {
		return w
	}
	return nil
}

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// New returns a bar drawing on w, nil when w is nil.
func New(w io.Writer, cfg Config) *Bar {
	if w == nil {
		return nil
	}
	if cfg.Unit == "" {
		cfg.Unit = "done"
	}
	return &Bar{w: w, cfg: cfg, start: time.Now()}
}

// Start redraws the bar a few times a second until Finish. A second
// Start, or one after Finish, does nothing.
func (b *Bar) Start() {
	if b == nil {
		return
	}
	_ = b.life.Start(context.Background(), func(context.Context) error {
		b.life.Go(b.redraw)
		return nil
	})
}

// redraw draws the bar every redraw interval until life ends.
func (b *Bar) redraw(life context.Context) {
	t := time.NewTicker(redraw)
	defer t.Stop()
	for {
		select {
		case <-life.Done():
			return
		case <-t.C:
			b.mu.Lock()
			b.draw()
			b.mu.Unlock()
		}
	}
}

// Add counts n more steps done.
func (b *Bar) Add(n int) {
	if b != nil {
		b.n.Add(int64(n))
	}
}

// Printf writes a line to w (the command's output) with the bar cleared
// around it and drawn again under it.
func (b *Bar) Printf(w io.Writer, format string, args ...any) {
	if b == nil {
		fmt.Fprintf(w, format, args...)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.finished {
		fmt.Fprint(b.w, "\r\x1b[K")
	}
	fmt.Fprintf(w, format, args...)
	if !b.finished {
		b.draw()
	}
}

// Finish stops the redrawing, draws the bar a last time and ends its
// line. A second Finish does nothing.
func (b *Bar) Finish() {
	if b == nil {
		return
	}
	_ = b.life.Stop(context.Background(), nil, nil)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.draw()
	fmt.Fprintln(b.w)
	b.finished = true
}

// draw redraws the line; b.mu is held.
func (b *Bar) draw() {
	n, elapsed := b.n.Load(), time.Since(b.start)
	fmt.Fprint(b.w, "\r"+Line(b.cfg, n, elapsed)+"\x1b[K")
}

// Line is the bar's text after n steps in elapsed.
func Line(cfg Config, n int64, elapsed time.Duration) string {
	if cfg.Unit == "" {
		cfg.Unit = "done"
	}
	var frac float64
	var count, eta string
	if cfg.Total > 0 {
		frac = float64(n) / float64(cfg.Total)
		count = fmt.Sprintf("%d/%d %s", n, cfg.Total, cfg.Unit)
		if n > 0 && n < int64(cfg.Total) {
			left := time.Duration(float64(elapsed) / float64(n) * float64(int64(cfg.Total)-n))
			eta = "  eta " + left.Round(time.Second).String()
		}
	} else {
		if cfg.Duration > 0 {
			frac = float64(elapsed) / float64(cfg.Duration)
		}
		count = fmt.Sprintf("%d %s, %s/%s", n, cfg.Unit, elapsed.Round(time.Second), cfg.Duration)
	}
	frac = min(max(frac, 0), 1)
	filled := int(frac * width)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(n) / s
	}
	label := ""
	if cfg.Label != "" {
		label = fmt.Sprintf("%-26s ", cfg.Label)
	}
	return fmt.Sprintf("%s[%s%s] %3.0f%%  %s  %.0f %s/s%s",
		label, strings.Repeat("=", filled), strings.Repeat(" ", width-filled), frac*100, count, rate, cfg.Unit, eta)
}
