package metrics

import (
	"math"
	"testing"
)

// A block that measured nothing (0: no request finished in it) is not a value of the figure: the
// spread is over the blocks that measured it, as BatchMeans refuses such a block. Counted, it read as
// a 100 % spread, and the judge set a real drift aside as "did not repeat within this run".
func TestSpreadPctSkipsBlocksThatMeasuredNothing(t *testing.T) {
	for _, tt := range []struct {
		blocks []float64
		want   float64
	}{
		{[]float64{100, 110, 105}, 10},
		{[]float64{100, 0, 110}, 10},
		{[]float64{100, math.NaN(), 110}, 10},
		{[]float64{100, math.Inf(1), 110}, 10},
		{[]float64{100, 0, 0}, 0}, // one block measured: no spread to give
		{[]float64{100}, 0},
		{nil, 0},
		{[]float64{100, 100, 100}, 0},
	} {
		if got := SpreadPct(100, tt.blocks); !(math.Abs(got-tt.want) <= 1e-9) {
			t.Errorf("SpreadPct(100, %v) = %v, want %v", tt.blocks, got, tt.want)
		}
	}
	if got := SpreadPct(0, []float64{1, 2}); got != 0 {
		t.Errorf("SpreadPct with no centre = %v, want 0", got)
	}
}

func TestBatchMeansTinyConstantAndBadInputs(t *testing.T) {
	if BatchMeans(10, []float64{10}) != nil || BatchMeans(10, nil) != nil {
		t.Error("an interval from fewer than two blocks")
	}
	if BatchMeans(10, []float64{10, 0, 10}) != nil || BatchMeans(10, []float64{10, math.NaN(), 10}) != nil {
		t.Error("an interval from a block that measured nothing")
	}
	if BatchMeans(10, make([]float64, 12)) != nil {
		t.Error("an interval past the t table")
	}
	ci := BatchMeans(10, []float64{10, 10, 10})
	if ci == nil || ci.Lo != 10 || ci.Hi != 10 {
		t.Errorf("constant blocks: %+v, want [10, 10]", ci)
	}
	ci = BatchMeans(10, []float64{9, 11})
	if ci == nil || math.Abs(ci.Hi-(10+12.706)) > 1e-9 || ci.Lo != 0 {
		t.Errorf("two blocks: %+v, want [0, 22.706] (t(1) = 12.706, clipped at 0)", ci)
	}
}
