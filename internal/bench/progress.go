package bench

import (
	"io"
	"time"

	"github.com/toolpool/toolpool/internal/progress"
)

// phaseProgress draws the running phase's progress bar (internal/progress)
// on a terminal: one bar per phase, under the phase's label.
type phaseProgress struct {
	w     io.Writer
	label string
}

func newProgress(w io.Writer) *phaseProgress {
	if w == nil {
		return nil
	}
	return &phaseProgress{w: w}
}

// setLabel names the next phase.
func (p *phaseProgress) setLabel(label string) {
	if p != nil {
		p.label = label
	}
}

// begin starts drawing a phase of total calls (or of duration d when total
// is 0); the caller Adds the calls completed and Finishes the bar. The bar
// is nil (drawing nothing) when p is.
func (p *phaseProgress) begin(total int, d time.Duration) *progress.Bar {
	if p == nil {
		return nil
	}
	bar := progress.New(p.w, progress.Config{Label: p.label, Total: total, Duration: d, Unit: "calls"})
	bar.Start()
	return bar
}
