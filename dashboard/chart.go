package dashboard

import (
	"fmt"
	"html/template"
	"strings"
	"time"
)

// The size of a chart, in the units of its viewBox.
const (
	chartWidth  = 600
	chartHeight = 120
	chartLeft   = 56 // room for the y labels
	chartBottom = 18 // room for the x labels
)

// lagChart renders samples of the last window before now as an inline SVG
// line chart. It writes nothing but numbers and fixed text, so the result
// is safe HTML; styling comes from the stylesheet (the CSP admits no
// inline style).
func lagChart(samples []sample, window time.Duration, now time.Time, label string) template.HTML {
	from := now.Add(-window)
	shown := within(samples, from)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s over the last %s">`,
		chartWidth, chartHeight, template.HTMLEscapeString(label), formatWindow(window))
	plotW, plotH := float64(chartWidth-chartLeft-4), float64(chartHeight-chartBottom-8)
	top := 8.0
	var peak int64
	for _, s := range shown {
		peak = max(peak, s.Value)
	}
	scale := niceCeil(peak)
	x := func(t time.Time) float64 {
		return float64(chartLeft) + plotW*float64(t.Sub(from))/float64(window)
	}
	y := func(v int64) float64 {
		return top + plotH - plotH*float64(v)/float64(scale)
	}
	// Axes and grid.
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, chartLeft, top, chartLeft, top+plotH)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, chartLeft, top+plotH, chartWidth-4, top+plotH)
	fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, chartLeft, top, chartWidth-4, top)
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%.1f" text-anchor="end">%s</text>`, chartLeft-6, top+4, formatNum(scale))
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%.1f" text-anchor="end">0</text>`, chartLeft-6, top+plotH+4)
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d">−%s</text>`, chartLeft, chartHeight-3, formatWindow(window))
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">now</text>`, chartWidth-4, chartHeight-3)
	switch len(shown) {
	case 0:
		fmt.Fprintf(&b, `<text class="label" x="%.1f" y="%.1f" text-anchor="middle">collecting samples…</text>`,
			float64(chartLeft)+plotW/2, top+plotH/2)
	case 1:
		fmt.Fprintf(&b, `<circle class="point" cx="%.1f" cy="%.1f" r="3"/>`, x(shown[0].At), y(shown[0].Value))
	default:
		b.WriteString(`<polyline class="line" points="`)
		for i, s := range shown {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", x(s.At), y(s.Value))
		}
		b.WriteString(`"/>`)
		last := shown[len(shown)-1]
		fmt.Fprintf(&b, `<circle class="point" cx="%.1f" cy="%.1f" r="3"/>`, x(last.At), y(last.Value))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and escaped text only
}

// niceCeil returns a round number at least n (1, 2, 5 times a power of
// ten), and at least 1, for the top of a chart's scale.
func niceCeil(n int64) int64 {
	if n <= 1 {
		return 1
	}
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= n {
				return m * p
			}
		}
		if p > 1e17 {
			return n
		}
	}
}

// within returns the samples at or after from.
func within(samples []sample, from time.Time) []sample {
	var shown []sample
	for _, s := range samples {
		if !s.At.Before(from) {
			shown = append(shown, s)
		}
	}
	return shown
}

// formatWindow renders a chart's span: 10m, 90s, 1h30m.
func formatWindow(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d < time.Minute:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return formatAge(d)
}

// The size of a sparkline.
const (
	sparkWidth  = 200
	sparkHeight = 36
)

// sparkline renders samples of the last window before now as a small
// inline SVG line without axes, its peak given in the label.
func sparkline(samples []sample, window time.Duration, now time.Time, label string) template.HTML {
	from := now.Add(-window)
	shown := within(samples, from)
	var peak int64
	for _, s := range shown {
		peak = max(peak, s.Value)
	}
	scale := niceCeil(peak)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart spark" viewBox="0 0 %d %d" role="img" aria-label="%s over the last %s, peak %d">`,
		sparkWidth, sparkHeight, template.HTMLEscapeString(label), formatWindow(window), peak)
	fmt.Fprintf(&b, `<line class="axis" x1="0" y1="%d" x2="%d" y2="%d"/>`, sparkHeight-1, sparkWidth, sparkHeight-1)
	x := func(t time.Time) float64 { return float64(sparkWidth-4) * float64(t.Sub(from)) / float64(window) }
	y := func(v int64) float64 { return 2 + float64(sparkHeight-5)*(1-float64(v)/float64(scale)) }
	if len(shown) > 1 {
		b.WriteString(`<polyline class="line" points="`)
		for i, s := range shown {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", x(s.At), y(s.Value))
		}
		b.WriteString(`"/>`)
	}
	if len(shown) > 0 {
		last := shown[len(shown)-1]
		fmt.Fprintf(&b, `<circle class="point" cx="%.1f" cy="%.1f" r="2.5"/>`, x(last.At), y(last.Value))
	}
	fmt.Fprintf(&b, `<text class="label" x="%d" y="11" text-anchor="end">%s</text>`, sparkWidth-2, formatNum(peak))
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // numbers and escaped text only
}
