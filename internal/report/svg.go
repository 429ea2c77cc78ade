package report

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// Charts are drawn here as inline SVG, so the report needs no script, no network and prints as
// vectors. Every chart is an <svg class="chart"> whose plotted marks carry class "mark": the browser
// test counts them. Output is deterministic (fixed decimals, fixed order) for the golden tests.

// palette is Okabe–Ito (colour-blind safe), then darker variants for runs with more than 8 series.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
	"#004B75", "#9A6A00", "#006B50", "#8E4F78", "#2D7FA6", "#8F3F00", "#A89F22", "#555555"}

func seriesColor(i int) string { return palette[i%len(palette)] }

// Point is one plotted value. Tip is shown on hover (an SVG <title>); Open draws a hollow marker
// (a lower-bound figure).
type Point struct {
	X, Y  float64
	Tip   string
	Open  bool
	Alone bool // not on the line: drawn as a square marker (e.g. the throughput probe)
}

// Series is one line. Dashed marks a series whose figures are lower bounds.
type Series struct {
	Name   string
	Points []Point
	Dashed bool
}

// RefLine is a horizontal reference (an SLO, a power limit).
type RefLine struct {
	Y     float64
	Label string
}

// EventLine is a vertical mark at one x (a co-tenant seen on the GPU during the load).
type EventLine struct {
	X     float64
	Label string
}

// LineChart is an x/y chart with one line per series.
type LineChart struct {
	Title, XLabel, YLabel string
	Series                []Series
	Refs                  []RefLine
	Events                []EventLine
	Markers               bool    // draw a marker on each point
	YCap                  float64 // when > 0, the y axis stops here and higher points sit on the top edge as ▲
}

const (
	chartW   = 640
	plotTop  = 34
	plotH    = 220
	marginL  = 64
	marginR  = 20
	legendDY = 18
)

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func esc(s string) string { return html.EscapeString(s) }

// SVG draws the chart.
func (c LineChart) SVG() template.HTML {
	c.Series = finite(c.Series)
	var xs, ys []float64
	for _, s := range c.Series {
		for _, p := range s.Points {
			xs = append(xs, p.X)
			ys = append(ys, p.Y)
		}
	}
	for _, r := range c.Refs {
		ys = append(ys, r.Y)
	}
	for _, e := range c.Events {
		xs = append(xs, e.X)
	}
	xlo, xhi := extent(xs)
	xt := niceTicks(xlo, xhi, 6)
	ylo, yhi := extent(ys)
	ymax := yhi
	if c.YCap > 0 {
		ymax = min(yhi, c.YCap)
	}
	yt := niceTicks(ylo, ymax, 5)
	capped := yhi > yt[len(yt)-1] // the nice top may still hold every point
	plotW := float64(chartW - marginL - marginR)
	sx := func(x float64) float64 { return marginL + (x-xt[0])/(xt[len(xt)-1]-xt[0])*plotW }
	top := yt[len(yt)-1]
	sy := func(y float64) float64 { return plotTop + plotH - (math.Min(y, top)-yt[0])/(top-yt[0])*plotH }

	legendRows, legend := drawLegend(c.Series, plotTop+plotH+60)
	h := plotTop + plotH + 52 + legendRows*legendDY

	var b strings.Builder
	open(&b, c.Title, h)
	axes(&b, xt, yt, sx, sy, c.XLabel, c.YLabel)
	for _, r := range c.Refs {
		y := f1(sy(r.Y))
		fmt.Fprintf(&b, `<line class="ref" x1="%d" x2="%s" y1="%s" y2="%s" stroke="#C00000" stroke-width="1.5" stroke-dasharray="6 4"/>`,
			marginL, f1(marginL+plotW), y, y)
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end" font-size="11" fill="#C00000">%s</text>`, f1(marginL+plotW-4), f1(sy(r.Y)-5), esc(r.Label))
	}
	for _, e := range c.Events {
		x := f1(sx(e.X))
		fmt.Fprintf(&b, `<line class="event" x1="%s" x2="%s" y1="%s" y2="%s" stroke="#7030A0" stroke-width="1.5" stroke-dasharray="3 3"/>`,
			x, x, f1(plotTop), f1(plotTop+plotH))
		fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="11" fill="#7030A0">%s</text>`, f1(sx(e.X)+4), f1(plotTop+12), esc(e.Label))
	}
	for i, s := range c.Series {
		if len(s.Points) == 0 {
			continue
		}
		col := seriesColor(i)
		var d strings.Builder
		for _, p := range s.Points {
			if p.Alone {
				continue
			}
			cmd := "L"
			if d.Len() == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%s %s", cmd, f1(sx(p.X)), f1(sy(p.Y)))
		}
		if strings.Contains(d.String(), "L") {
			fmt.Fprintf(&b, `<path class="mark line" d="%s" fill="none" stroke="%s" stroke-width="2"%s><title>%s</title></path>`,
				d.String(), col, dashAttr(s.Dashed), esc(s.Name))
		}
		if !c.Markers {
			continue
		}
		for _, p := range s.Points {
			fill := col
			if p.Open {
				fill = "#fff"
			}
			if p.Y > top { // off the capped axis: an arrow on the top edge, the value in the tooltip
				x, y := sx(p.X), sy(p.Y)
				fmt.Fprintf(&b, `<path class="mark pt" d="M%s %sL%s %sL%s %sZ" fill="%s"><title>%s (off the scale)</title></path>`,
					f1(x-5), f1(y+4), f1(x+5), f1(y+4), f1(x), f1(y-5), col, esc(p.Tip))
				continue
			}
			if p.Alone {
				fmt.Fprintf(&b, `<rect class="mark pt" x="%s" y="%s" width="8" height="8" fill="%s" stroke="%s" stroke-width="1.5"><title>%s</title></rect>`,
					f1(sx(p.X)-4), f1(sy(p.Y)-4), fill, col, esc(p.Tip))
				continue
			}
			fmt.Fprintf(&b, `<circle class="mark pt" cx="%s" cy="%s" r="3.5" fill="%s" stroke="%s" stroke-width="1.5"><title>%s</title></circle>`,
				f1(sx(p.X)), f1(sy(p.Y)), fill, col, esc(p.Tip))
		}
	}
	if capped {
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="end" font-size="11" fill="#555">▲ above %s</text>`, f1(marginL+plotW), plotTop-6, tickLabel(top))
	}
	b.WriteString(legend)
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

// finite drops points that cannot be drawn (NaN or infinite): a broken figure must not break the chart.
func finite(ss []Series) []Series {
	out := make([]Series, len(ss))
	for i, s := range ss {
		out[i] = Series{Name: s.Name, Dashed: s.Dashed}
		for _, p := range s.Points {
			if !math.IsNaN(p.X) && !math.IsNaN(p.Y) && !math.IsInf(p.X, 0) && !math.IsInf(p.Y, 0) {
				out[i].Points = append(out[i].Points, p)
			}
		}
	}
	return out
}

// open writes the <svg> element with a title both visible and for screen readers.
func open(b *strings.Builder, title string, h int) {
	fmt.Fprintf(b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s" font-family="system-ui, sans-serif">`,
		chartW, h, chartW, h, esc(title))
	fmt.Fprintf(b, `<title>%s</title>`, esc(title))
	fmt.Fprintf(b, `<text x="%d" y="20" font-size="14" font-weight="600" fill="#111">%s</text>`, marginL, esc(title))
}

// axes draws the grid, tick labels and axis titles.
func axes(b *strings.Builder, xt, yt []float64, sx, sy func(float64) float64, xl, yl string) {
	x0, x1 := f1(sx(xt[0])), f1(sx(xt[len(xt)-1]))
	y0, y1 := f1(sy(yt[0])), f1(sy(yt[len(yt)-1]))
	for _, y := range yt {
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#e3e3e3"/>`, x0, x1, f1(sy(y)), f1(sy(y)))
		fmt.Fprintf(b, `<text x="%d" y="%s" text-anchor="end" font-size="11" fill="#444">%s</text>`, marginL-6, f1(sy(y)+4), tickLabel(y))
	}
	for _, x := range xt {
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#f0f0f0"/>`, f1(sx(x)), f1(sx(x)), y0, y1)
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="11" fill="#444">%s</text>`, f1(sx(x)), f1(sy(yt[0])+16), tickLabel(x))
	}
	fmt.Fprintf(b, `<path d="M%s %sL%s %sL%s %s" fill="none" stroke="#888"/>`, x0, y1, x0, y0, x1, y0)
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="12" fill="#222">%s</text>`,
		f1((sx(xt[0])+sx(xt[len(xt)-1]))/2), f1(sy(yt[0])+34), esc(xl))
	fmt.Fprintf(b, `<text transform="translate(14 %s) rotate(-90)" text-anchor="middle" font-size="12" fill="#222">%s</text>`,
		f1((sy(yt[0])+sy(yt[len(yt)-1]))/2), esc(yl))
}

// drawLegend lays series names out in rows under the plot; it returns the row count and the SVG.
func drawLegend(ss []Series, top int) (int, string) {
	var b strings.Builder
	x, row := marginL, 0
	for i, s := range ss {
		n := s.Name
		w := 34 + 7*len([]rune(n))
		if x+w > chartW-marginR && x > marginL {
			x, row = marginL, row+1
		}
		y := top + row*legendDY
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"%s/>`, x, x+20, y-4, y-4, seriesColor(i), dashAttr(s.Dashed))
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" fill="#222">%s</text>`, x+25, y, esc(n))
		x += w
	}
	if len(ss) == 0 {
		return 0, ""
	}
	return row + 1, b.String()
}

// dashAttr dashes the line of a lower-bound series.
func dashAttr(dashed bool) string {
	if dashed {
		return ` stroke-dasharray="5 3"`
	}
	return ""
}

// niceTicks returns ascending ticks covering [lo, hi] at a 1-2-2.5-5 step, about n of them.
func niceTicks(lo, hi float64, n int) []float64 {
	if hi <= lo || math.IsNaN(hi) || math.IsInf(hi, 0) {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag * 10
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step) * step
	var t []float64
	for k := 0; start+float64(k)*step < hi+step*0.999; k++ {
		// k × step, cleaned of binary noise (3 × 0.2 = 0.6000000000000001).
		v, _ := strconv.ParseFloat(strconv.FormatFloat(start+float64(k)*step, 'g', 12, 64), 64)
		t = append(t, v)
	}
	if len(t) < 2 {
		t = append(t, start+step)
	}
	return t
}

// extent is the range of v's finite values, stretched to include 0.
func extent(v []float64) (lo, hi float64) {
	for _, x := range v {
		if !math.IsInf(x, 0) && !math.IsNaN(x) {
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	return lo, hi
}

// tickLabel prints a tick value compactly: 12000 -> 12k, 2.5 -> 2.5.
func tickLabel(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	default:
		return strconv.FormatFloat(round3(v), 'f', -1, 64)
	}
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// Bar is one bar of a group; Bad draws it with a red outline (a breach).
type Bar struct {
	Series string
	Value  float64
	Tip    string
	Bad    bool
	Hatch  bool // a lower-bound or low-confidence value: not judged
}

// BarGroup is one labelled group of bars (one per series).
type BarGroup struct {
	Label string
	Bars  []Bar
}

// BarChart is a horizontal grouped bar chart with a vertical reference (the tolerance).
type BarChart struct {
	Title, XLabel string
	Series        []string // legend, colour order
	Groups        []BarGroup
	Refs          []float64 // vertical lines at these x values (e.g. the tolerance)
	RefLabel      string
}

const barH = 11

// SVG draws the chart. Groups stack downward; the label column is on the left.
func (c BarChart) SVG() template.HTML {
	var vals []float64
	for gi, g := range c.Groups {
		var ok []Bar // a bar that cannot be drawn (NaN, infinite) is left out
		for _, br := range g.Bars {
			if !math.IsNaN(br.Value) && !math.IsInf(br.Value, 0) {
				ok = append(ok, br)
				vals = append(vals, br.Value)
			}
		}
		c.Groups[gi].Bars = ok
	}
	lo, hi := extent(append(vals, c.Refs...))
	xt := niceTicks(lo, hi, 6)
	labelW := 250
	plotW := float64(chartW - labelW - marginR - 40)
	sx := func(x float64) float64 { return float64(labelW) + (x-xt[0])/(xt[len(xt)-1]-xt[0])*plotW }
	groupH := len(c.Series)*barH + 8
	top := plotTop + 4
	plotBottom := top + len(c.Groups)*groupH
	series := make([]Series, len(c.Series))
	for i, n := range c.Series {
		series[i].Name = n
	}
	legendRows, legend := drawLegend(series, plotBottom+40)
	h := plotBottom + 44 + legendRows*legendDY

	var b strings.Builder
	open(&b, c.Title, h)
	for _, x := range xt {
		fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%d" y2="%d" stroke="#eee"/>`, f1(sx(x)), f1(sx(x)), top, plotBottom)
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle" font-size="11" fill="#444">%s</text>`, f1(sx(x)), plotBottom+14, tickLabel(x))
	}
	fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%d" y2="%d" stroke="#666"/>`, f1(sx(0)), f1(sx(0)), top, plotBottom)
	fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle" font-size="12" fill="#222">%s</text>`, f1(sx(xt[0])+plotW/2), plotBottom+30, esc(c.XLabel))
	idx := map[string]int{}
	for i, s := range c.Series {
		idx[s] = i
	}
	for gi, g := range c.Groups {
		y0 := top + gi*groupH
		if gi%2 == 1 {
			fmt.Fprintf(&b, `<rect x="4" y="%d" width="%d" height="%d" fill="#f7f7f7"/>`, y0, chartW-8, groupH)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" font-size="11" fill="#222">%s</text>`, labelW-8, y0+groupH/2+4, esc(clip(g.Label, 40)))
		for _, br := range g.Bars {
			i := idx[br.Series]
			x0, x1 := sx(0), sx(br.Value)
			if x1 < x0 {
				x0, x1 = x1, x0
			}
			y := y0 + 4 + i*barH
			stroke := ""
			if br.Bad {
				stroke = ` stroke="#C00000" stroke-width="2"`
			}
			opacity := ""
			if br.Hatch {
				opacity = ` fill-opacity="0.35"`
			}
			fmt.Fprintf(&b, `<rect class="mark bar" x="%s" y="%d" width="%s" height="%d" fill="%s"%s%s><title>%s</title></rect>`,
				f1(x0), y, f1(math.Max(x1-x0, 1)), barH-2, seriesColor(i), opacity, stroke, esc(br.Tip))
			col := "#333"
			if br.Bad {
				col = "#C00000"
			}
			fmt.Fprintf(&b, `<text x="%s" y="%d" font-size="10" fill="%s">%s</text>`, f1(sx(math.Max(br.Value, 0))+4), y+barH-3, col, signedPct(br.Value))
		}
	}
	for _, r := range c.Refs {
		fmt.Fprintf(&b, `<line class="ref" x1="%s" x2="%s" y1="%d" y2="%d" stroke="#C00000" stroke-width="1.5" stroke-dasharray="6 4"/>`, f1(sx(r)), f1(sx(r)), top-6, plotBottom)
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle" font-size="11" fill="#C00000">%s</text>`, f1(sx(r)), top-9, esc(c.RefLabel))
	}
	b.WriteString(legend)
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
