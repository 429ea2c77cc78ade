package compare

import (
	"fmt"
	"math"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Cell is one GPU's figure for one metric.
type Cell struct {
	GPU int
	Figure
}

// GPUs judges one metric across the cards of a host, each against the best card by Pair with the
// variance tolerance: a card is flagged only when its figure can show it, else inconclusive with the
// reason; too few samples behind the weakest make the comparison low-confidence.
func GPUs(metric string, cells []Cell, higherIsBetter bool, g Guards) results.Compare {
	c := results.Compare{Metric: metric, HigherIsBetter: higherIsBetter, VariancePct: g.VariancePct}
	cells, bi, done := begin(&c, cells, higherIsBetter, g.MinSamples)
	if done {
		return c
	}
	best := cells[bi]
	dir := map[bool]string{true: "below", false: "above"}[higherIsBetter]
	for i, x := range cells {
		cell := results.CompareCell{GPU: x.GPU, Value: x.Value, DeltaPct: DeltaPct(x.Value, best.Value, higherIsBetter),
			LowerBound: x.LowerBound, Reason: "best"}
		if i != bi {
			res, over, why := Pair(metric, x.Figure, best.Figure, higherIsBetter, g.VariancePct, g)
			what := fmt.Sprintf("%s %s on gpu %d is %.1f %% %s the best (gpu %d: %s)", metric, Num(x.Value), x.GPU, over, dir, best.GPU, Num(best.Value))
			if !decide(&cell, res, why, what, fmt.Sprintf(", beyond the %g %% tolerance", g.VariancePct)) {
				cell.Reason = fmt.Sprintf("within %g %% of best (%.1f %% %s)", g.VariancePct, over, dir)
			}
		}
		c.Values = append(c.Values, cell)
	}
	return c
}

// begin starts comparison c of cells: the finite ones (NaN/Inf can be neither compared nor written
// to JSON: noted and left out), the best's index and value; done (with a note) when fewer than two
// are left, and low confidence when the weakest with a sample count has fewer than minSamples.
func begin(c *results.Compare, cells []Cell, higher bool, minSamples int) (_ []Cell, best int, done bool) {
	var out []Cell
	weakest := -1
	for _, x := range cells {
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			c.Note = joinNote(c.Note, fmt.Sprintf("gpu %d has no finite value: left out", x.GPU))
			continue
		}
		if len(out) > 0 && (higher && x.Value > out[best].Value || !higher && x.Value < out[best].Value) {
			best = len(out)
		}
		if x.Samples > 0 && (weakest < 0 || x.Samples < weakest) {
			weakest = x.Samples
		}
		out = append(out, x)
	}
	switch {
	case len(out) == 0:
		c.Note = joinNote(c.Note, "no values to compare")
		return nil, 0, true
	case len(out) < 2:
		c.Best = out[0].Value
		c.Values = []results.CompareCell{{GPU: out[0].GPU, Value: out[0].Value, LowerBound: out[0].LowerBound}}
		c.Note = joinNote(c.Note, "single GPU: nothing to compare")
		return out, 0, true
	}
	c.Best = out[best].Value
	if minSamples > 0 && weakest >= 0 && weakest < minSamples {
		c.LowConfidence = true
		c.Note = joinNote(c.Note, fmt.Sprintf("low confidence: the weakest GPU's figure has %d requests behind it (< %d): a card with too few is not judged; %s", weakest, minSamples, Tighten))
	}
	return out, best, false
}

// decide writes a cell's outcome from its rule's result: not flagged for why, inconclusive, or
// flagged (beyond says past what); false for a plain pass, whose reason the caller writes.
func decide(cell *results.CompareCell, res, why, what, beyond string) bool {
	switch {
	case res == Pass && why == "":
		return false
	case res == Pass:
		cell.Reason = what + ": not flagged, " + why
	case res == Inconclusive:
		cell.Inconclusive, cell.Reason = true, what+": inconclusive, not flagged: "+why
	default:
		cell.Flagged = true
		cell.Reason = what + beyond + ": check this card's clocks, power, PCIe link and NUMA binding"
	}
	return true
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
