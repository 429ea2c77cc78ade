package analysis

import "testing"

func TestAnalyzeSaturation(t *testing.T) {
	cases := []struct {
		name                   string
		rungs                  []float64
		peak                   float64
		truncated, unsaturated bool
	}{
		{"linear ladder, probe just above: unsaturated", []float64{400, 800, 1200, 1600, 2000, 2400}, 2700, false, true},
		{"bent knee: not", []float64{400, 800, 1200, 1600, 1900, 1950}, 2100, false, false},
		{"probe far over the top rung: not unsaturated, not truncated", []float64{400, 800, 1200, 1600, 2000, 2400}, 3200, false, false},
		{"flat ladder: not", []float64{1000, 1000, 1000, 1000, 1000, 1000}, 1000, false, false},
		{"top rung over the probe, still climbing: truncated", []float64{400, 800, 1200, 1600, 2000, 2400}, 2300, true, false},
		{"top rung over the probe but flat: not truncated", []float64{400, 800, 1200, 1600, 2380, 2400}, 2300, false, false},
		{"peak exactly 1.25 × top: unsaturated", []float64{400, 800, 1200, 1600, 2000, 2400}, 3000, false, true},
		{"peak equal to top: truncated (top ≥ peak) and unsaturated", []float64{400, 800, 1200, 1600, 2000, 2400}, 2400, true, true},
		{"four rungs: never unsaturated", []float64{400, 800, 1200, 1600}, 1700, false, false},
		{"last step just under 0.6 × mean: not", []float64{400, 800, 1200, 1600, 2000, 2239}, 2300, false, false},
		{"last step exactly 0.6 × mean: unsaturated", []float64{400, 800, 1200, 1600, 2000, 2240}, 2300, false, true},
		{"barely rising ladder (top ≤ 1.05 × first): not", []float64{1000, 1010, 1020, 1030, 1040, 1049}, 1100, false, false},
		{"falling last step: not", []float64{400, 800, 1200, 1600, 2000, 1990}, 2100, false, false},
		{"no rungs", nil, 2000, false, false},
	}
	for _, c := range cases {
		s := AnalyzeSaturation(c.rungs, c.peak)
		if s.Truncated != c.truncated || s.Unsaturated != c.unsaturated {
			t.Errorf("%s: truncated=%v unsaturated=%v, want %v %v (%s)", c.name, s.Truncated, s.Unsaturated, c.truncated, c.unsaturated, s.Reason)
		}
		if (s.Truncated || s.Unsaturated) != s.LowerBound() || ((s.Truncated || s.Unsaturated) && s.Reason == "") {
			t.Errorf("%s: LowerBound/Reason inconsistent: %+v", c.name, s)
		}
		if s.Peak != c.peak || len(s.Rungs) != len(c.rungs) {
			t.Errorf("%s: peak/rungs not recorded: %+v", c.name, s)
		}
	}
}
