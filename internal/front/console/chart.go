package console

import (
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// The charts are SVG drawn here, on the server, into the page: no
// script, no library, no CDN, nothing to build (decisions.md). They are
// classes and numbers only, so the console's Content-Security-Policy
// (no inline style or script) holds: the colours are in style.css.

// Geometry of a chart, in SVG user units (the SVG scales to its box).
const (
	chartW      = 480
	chartH      = 150
	chartLeft   = 52 // the y axis' labels
	chartRight  = 8
	chartTop    = 8
	chartBottom = 20 // the x axis' labels
)

// series is one line of a chart: a value per slot, NaN where there is no
// sample (drawn as a gap, not a zero).
type series struct {
	Name   string
	Class  string // CSS class: its colour (s-<n>, or a class name)
	Values []float64
}

// chart is one chart: lines over the same slots.
type chart struct {
	ID     string // the element's id
	Title  string
	Unit   string  // "/s", "ms", "s" or "" (calls)
	Mark   float64 // a threshold drawn dashed (0: none)
	MarkAs string  // its label
	Series []series
	Start  time.Time     // the first slot's start
	Step   time.Duration // a slot's length
}

// last is s's last value that is a number, and whether there is one.
func (s series) last() (float64, bool) {
	for i := len(s.Values) - 1; i >= 0; i-- {
		if !math.IsNaN(s.Values[i]) {
			return s.Values[i], true
		}
	}
	return 0, false
}

// Legend is the series' names with their last value, for the chart's
// caption.
func (c chart) Legend() []legendItem {
	out := make([]legendItem, 0, len(c.Series))
	for _, s := range c.Series {
		it := legendItem{Name: s.Name, Class: s.Class, Last: "-"}
		if v, ok := s.last(); ok {
			it.Last = formatValue(v, c.Unit)
		}
		out = append(out, it)
	}
	return out
}

// legendItem is one line's name and last value.
type legendItem struct{ Name, Class, Last string }

// top is the chart's y range: a round number above every value and the
// mark (1 when all are 0 or none).
func (c chart) top() float64 {
	hi := c.Mark
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) && v > hi {
				hi = v
			}
		}
	}
	if hi <= 0 {
		return 1
	}
	// 1, 2 or 5 times a power of ten.
	p := math.Pow(10, math.Floor(math.Log10(hi)))
	for _, m := range []float64{1, 2, 5, 10} {
		if hi <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// SVG draws the chart.
func (c chart) SVG() template.HTML {
	var b strings.Builder
	top := c.top()
	n := 0
	for _, s := range c.Series {
		n = max(n, len(s.Values))
	}
	plotW, plotH := float64(chartW-chartLeft-chartRight), float64(chartH-chartTop-chartBottom)
	x := func(i int) float64 { return chartLeft + plotW*float64(i)/float64(max(n-1, 1)) }
	y := func(v float64) float64 { return chartTop + plotH*(1-v/top) }
	title := c.Title + " over the last hour"
	b.WriteString(`<svg class="chart" id="` + template.HTMLEscapeString(c.ID) + `" viewBox="0 0 ` + itoa(chartW) + ` ` + itoa(chartH) +
		`" role="img" aria-labelledby="` + template.HTMLEscapeString(c.ID) + `-t"><title id="` + template.HTMLEscapeString(c.ID) + `-t">` +
		template.HTMLEscapeString(title) + `</title>`)
	// The y axis: 0, half and the top, as grid lines with labels.
	for _, f := range []float64{0, 0.5, 1} {
		yy := ftoa(y(top * f))
		b.WriteString(`<line class="grid" x1="` + itoa(chartLeft) + `" x2="` + itoa(chartW-chartRight) + `" y1="` + yy + `" y2="` + yy + `"/>`)
		b.WriteString(`<text class="axis" x="` + itoa(chartLeft-4) + `" y="` + ftoa(y(top*f)+4) + `" text-anchor="end">` +
			template.HTMLEscapeString(formatValue(top*f, c.Unit)) + `</text>`)
	}
	// The x axis: the time before now every quarter of the range.
	if n > 1 {
		for q := 0; q <= 4; q++ {
			i := (n - 1) * q / 4
			label := "now"
			if q < 4 {
				label = "−" + compactDuration((c.Step * time.Duration(n-i)).Round(time.Minute))
			}
			anchor := "middle"
			switch q {
			case 0:
				anchor = "start"
			case 4:
				anchor = "end"
			}
			b.WriteString(`<text class="axis" x="` + ftoa(x(i)) + `" y="` + itoa(chartH-5) + `" text-anchor="` + anchor + `">` + label + `</text>`)
		}
	}
	if c.Mark > 0 {
		yy := ftoa(y(c.Mark))
		b.WriteString(`<line class="mark" x1="` + itoa(chartLeft) + `" x2="` + itoa(chartW-chartRight) + `" y1="` + yy + `" y2="` + yy + `"><title>` +
			template.HTMLEscapeString(c.MarkAs) + `</title></line>`)
	}
	for _, s := range c.Series {
		writeLine(&b, s, x, y)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // numbers and escaped text only
}

// writeLine draws s as polylines, broken where a value is missing; a lone
// value between gaps is a dot.
func writeLine(b *strings.Builder, s series, x func(int) float64, y func(float64) float64) {
	cls := template.HTMLEscapeString("line " + s.Class)
	var pts []string
	flush := func() {
		switch len(pts) {
		case 0:
		case 1:
			xy := strings.Split(pts[0], ",")
			b.WriteString(`<circle class="` + cls + `" cx="` + xy[0] + `" cy="` + xy[1] + `" r="1.5"/>`)
		default:
			b.WriteString(`<polyline class="` + cls + `" points="` + strings.Join(pts, " ") + `"/>`)
		}
		pts = pts[:0]
	}
	for i, v := range s.Values {
		if math.IsNaN(v) {
			flush()
			continue
		}
		pts = append(pts, ftoa(x(i))+","+ftoa(y(v)))
	}
	flush()
}

// formatValue is v in unit, short.
func formatValue(v float64, unit string) string {
	switch unit {
	case "ms":
		return compactDuration(time.Duration(v * float64(time.Millisecond)))
	case "s":
		return compactDuration(time.Duration(v * float64(time.Second)))
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if v >= 10 || v == math.Trunc(v) {
		s = strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	} else if len(s) > 4 {
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	return s + unit
}

// compactDuration is d in a few characters: 0, 850µs, 12ms, 1.5s, 45s,
// 2m30s, 1h5m.
func compactDuration(d time.Duration) string {
	short := func(v float64, unit string) string {
		if v >= 10 {
			return strconv.FormatFloat(math.Round(v), 'f', 0, 64) + unit
		}
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + unit
	}
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return short(float64(d)/float64(time.Microsecond), "µs")
	case d < time.Second:
		return short(float64(d)/float64(time.Millisecond), "ms")
	case d < time.Minute:
		return short(d.Seconds(), "s")
	case d < time.Hour:
		d = d.Round(time.Second)
		if d%time.Minute == 0 {
			return strconv.Itoa(int(d/time.Minute)) + "m"
		}
		return strconv.Itoa(int(d/time.Minute)) + "m" + strconv.Itoa(int(d%time.Minute/time.Second)) + "s"
	}
	d = d.Round(time.Minute)
	return strconv.Itoa(int(d/time.Hour)) + "h" + strconv.Itoa(int(d%time.Hour/time.Minute)) + "m"
}

func itoa(n int) string { return strconv.Itoa(n) }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }
