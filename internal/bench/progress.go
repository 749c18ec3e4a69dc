package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// progress draws a one-line progress bar for the running phase on a
// terminal, redrawn a few times a second.
type progress struct {
	w     io.Writer
	label string

	stop chan struct{}
	wg   sync.WaitGroup
}

const progressWidth = 30

func newProgress(w io.Writer) *progress {
	if w == nil {
		return nil
	}
	return &progress{w: w}
}

// setLabel names the next phase.
func (p *progress) setLabel(label string) {
	if p != nil {
		p.label = label
	}
}

// begin starts drawing a phase of total calls (or of duration d when total
// is 0), whose completed calls done counts.
func (p *progress) begin(total int, d time.Duration, done *atomic.Int64) {
	p.stop = make(chan struct{})
	start := time.Now()
	p.wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				p.draw(total, d, done.Load(), time.Since(start))
				fmt.Fprintln(p.w)
				return
			case <-t.C:
				p.draw(total, d, done.Load(), time.Since(start))
			}
		}
	})
}

func (p *progress) draw(total int, d time.Duration, n int64, elapsed time.Duration) {
	var frac float64
	var count string
	if total > 0 {
		frac = float64(n) / float64(total)
		count = fmt.Sprintf("%d/%d calls", n, total)
	} else {
		frac = float64(elapsed) / float64(d)
		count = fmt.Sprintf("%d calls, %s/%s", n, elapsed.Round(time.Second), d)
	}
	frac = min(max(frac, 0), 1)
	filled := int(frac * progressWidth)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(n) / s
	}
	fmt.Fprintf(p.w, "\r%-26s [%s%s] %3.0f%%  %s  %.0f calls/s\x1b[K",
		p.label, strings.Repeat("=", filled), strings.Repeat(" ", progressWidth-filled), frac*100, count, rate)
}

func (p *progress) finish() {
	close(p.stop)
	p.wg.Wait()
}
