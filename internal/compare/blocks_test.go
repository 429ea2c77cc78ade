package compare

import (
	"math"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// driftCells are four GPUs' median TPOT measured in three blocks under an engine drift common to
// all of them (the blocks read 1.00, 1.25 and 1.10 × the healthy step), gpu 1 slowFactor × slower;
// each figure's interval holds the drift (±6 %), as one over requests pooled across blocks does.
func driftCells(slowFactor float64, blocks bool) []Cell {
	drift := []float64{1.00, 1.25, 1.10}
	noise := [][]float64{{1, 1.002, 0.999}, {0.998, 1.001, 1}, {1.001, 0.999, 1.002}, {1, 1, 0.998}}
	var cells []Cell
	for g := range 4 {
		base := 7.0
		if g == 1 {
			base *= slowFactor
		}
		var vals []float64
		for j, d := range drift {
			vals = append(vals, base*d*noise[g][j])
		}
		v := base * 1.1
		f := Figure{Value: v, Samples: 30, CI: &results.Interval{Lo: v / 1.06, Hi: v * 1.06, Level: 0.95}}
		if blocks {
			f.Blocks = vals
		}
		cells = append(cells, Cell{GPU: g, Figure: f})
	}
	return cells
}

func TestBlocksCancelACommonDrift(t *testing.T) {
	g := LLMGuards()
	// Pooled, the straggler's interval reaches inside the margin: undecided.
	c := Peers("tpot_p50_ms", driftCells(1/0.9, false), false, g)
	if c.Values[1].Flagged || !c.Values[1].Inconclusive {
		t.Fatalf("pooled intervals: gpu 1 %+v, want inconclusive", c.Values[1])
	}
	// Block by block the drift cancels: gpu 1 is 11.1 % slower with a narrow interval, and alone.
	c = Peers("tpot_p50_ms", driftCells(1/0.9, true), false, g)
	for i, v := range c.Values {
		if v.Flagged != (i == 1) || v.Inconclusive {
			t.Fatalf("block by block: gpu %d %+v; want only gpu 1 flagged", i, v)
		}
	}
	s := c.Values[1]
	if math.Abs(s.DeltaPct-11.1) > 0.5 || s.DeltaCI == nil || !(s.DeltaCI.Lo > 10) || !strings.Contains(s.Reason, "block by block") {
		t.Fatalf("gpu 1: gap %.2f %% %+v: %s", s.DeltaPct, s.DeltaCI, s.Reason)
	}
	// Healthy GPUs under the same drift: all within the margin, none undecided.
	c = Peers("tpot_p50_ms", driftCells(1, true), false, g)
	for i, v := range c.Values {
		if v.Flagged || v.Inconclusive {
			t.Fatalf("healthy gpu %d: %+v", i, v)
		}
	}
	if !(c.DetectablePct > 10 && c.DetectablePct < 11) {
		t.Fatalf("detectable slowdown block by block %v %%, want just past the 10 %% margin", c.DetectablePct)
	}
}

func TestBlocksThatCannotPairAreNotUsed(t *testing.T) {
	cells := driftCells(1/0.9, true)
	cells[2].Blocks = cells[2].Blocks[:2] // one GPU with two blocks: the blocks do not pair
	if gaps := blockGaps(cells, false); gaps != nil {
		t.Fatal("unequal block counts paired")
	}
	cells = driftCells(1/0.9, true)
	cells[3].CI = nil // a figure without an interval of its own (a tail from too few requests)
	if gaps := blockGaps(cells, false); gaps != nil {
		t.Fatal("a figure without an interval paired by its blocks")
	}
	// Throughput (higher is better): a GPU at 0.9× reads 10 % worse, block by block.
	cells = driftCells(0.9, true)
	gaps := blockGaps(cells, true)
	if gaps == nil || math.Abs(pctOfLog(gaps[1].log, true)-10) > 0.3 {
		t.Fatalf("throughput gap %+v", gaps)
	}
}
