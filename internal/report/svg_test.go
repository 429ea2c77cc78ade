package report

import (
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestChartsGolden pins the SVG of every chart of the sample report. After a deliberate change,
// look at the new charts (open testdata/*.golden.svg in a browser) and run with -update.
func TestChartsGolden(t *testing.T) {
	s := readSample(t)
	p := buildPage(s)
	m := p.Hosts[0].Models[0]
	large := buildPage(buildSample(largeSample()))
	charts := map[string]string{
		"sweep_throughput":    string(m.Throughput),
		"sweep_ttft":          string(m.TTFT),
		"load_power":          string(m.Power),
		"burn_power":          string(p.Hosts[0].Health.Burn),
		"overhead":            string(p.Baseline.Chart),
		"overhead_per_metric": string(large.Baseline.Chart),
	}
	for name, svg := range charts {
		path := filepath.Join("testdata", name+".golden.svg")
		if svg == "" {
			t.Errorf("%s: no chart drawn", name)
			continue
		}
		var v any
		if err := xml.Unmarshal([]byte(svg), &v); err != nil {
			t.Errorf("%s: not well-formed XML: %v", name, err)
		}
		if *update {
			if err := os.WriteFile(path, []byte(svg+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (create with -update)", err)
		}
		if strings.TrimSpace(string(want)) != svg {
			t.Errorf("%s differs from %s (if intended, rerun with -update and review the SVG)", name, path)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	cases := []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 10910, 6, []float64{0, 2000, 4000, 6000, 8000, 10000, 12000}},
		{0, 43, 6, []float64{0, 10, 20, 30, 40, 50}},
		{0, 1, 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{0, 0, 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},  // empty range: a unit axis
		{-3, 14.2, 6, []float64{-5, 0, 5, 10, 15}},      // negative overheads
		{0, 700, 5, []float64{0, 200, 400, 600, 800}},   // the 2.5 step is skipped when 2 fits
		{0, 12, 5, []float64{0, 2.5, 5, 7.5, 10, 12.5}}, // 2.5 step
		{0, math.NaN(), 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
	}
	for _, c := range cases {
		if got := niceTicks(c.lo, c.hi, c.n); !reflect.DeepEqual(got, c.want) {
			t.Errorf("niceTicks(%v, %v, %d) = %v, want %v", c.lo, c.hi, c.n, got, c.want)
		}
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{10910: "10,910", 1234567: "1,234,567", -2500: "-2,500", 523.4: "523", 60: "60", 37.75: "37.8",
		7.83: "7.83", 2: "2", 0: "0", 0.0312: "0.031", 999.6: "1,000"} {
		if got := num(v); got != want {
			t.Errorf("num(%v) = %q, want %q", v, got, want)
		}
	}
	if num(math.NaN()) != "—" || num(math.Inf(1)) != "—" {
		t.Error("NaN/Inf must print as a dash")
	}
}

// Broken figures (NaN, Inf) are left out instead of producing an unparseable path.
func TestChartsSkipNonFinite(t *testing.T) {
	c := LineChart{Title: "t", Series: []Series{{Name: "a", Points: []Point{{X: 1, Y: 1}, {X: math.NaN(), Y: 2}, {X: 2, Y: math.Inf(1)}, {X: 3, Y: 3}}}}, Markers: true}
	svg := string(c.SVG())
	if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
		t.Errorf("non-finite value reached the SVG: %s", svg)
	}
	if n, err := countMarks(svg); err != nil || n != 3 { // one line + two points
		t.Errorf("marks = %d (%v), want 3", n, err)
	}
	b := BarChart{Title: "b", Series: []string{"vm"}, Groups: []BarGroup{{Label: "x", Bars: []Bar{{Series: "vm", Value: math.NaN()}}}}}
	if strings.Contains(string(b.SVG()), "NaN") {
		t.Error("NaN bar drawn")
	}
}

// A capped axis keeps the SLO region readable; the points beyond it stay visible on the top edge.
func TestChartYCap(t *testing.T) {
	c := LineChart{Title: "ttft", Series: []Series{{Name: "gpu 0", Points: []Point{{X: 1, Y: 20}, {X: 2, Y: 40}, {X: 3, Y: 5000, Tip: "5000 ms"}}}},
		Refs: []RefLine{{Y: 200, Label: "SLO"}}, Markers: true, YCap: 600}
	svg := string(c.SVG())
	if !strings.Contains(svg, "5000 ms (off the scale)") || !strings.Contains(svg, "▲ above 600") {
		t.Errorf("the capped point is not marked: %s", svg)
	}
	if strings.Contains(svg, ">5k<") {
		t.Error("the axis was not capped")
	}
	if n, _ := countMarks(svg); n != 4 { // line + 2 circles + 1 arrow
		t.Errorf("%d marks, want 4", n)
	}
}
