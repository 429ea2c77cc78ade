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
	cells = finiteCells(cells, &c)
	if len(cells) == 0 {
		c.Note = joinNote(c.Note, "no values to compare")
		return c
	}
	bi := bestIndex(cells, higherIsBetter)
	best := cells[bi]
	c.Best = best.Value
	for _, x := range cells {
		c.Values = append(c.Values, results.CompareCell{GPU: x.GPU, Value: x.Value,
			DeltaPct: DeltaPct(x.Value, best.Value, higherIsBetter), LowerBound: x.LowerBound})
	}
	if len(cells) < 2 {
		c.Note = joinNote(c.Note, "single GPU: nothing to compare")
		return c
	}
	lowConfidence(&c, cells, g.MinSamples)
	for i := range c.Values {
		if i == bi {
			c.Values[i].Reason = "best"
			continue
		}
		cell := &c.Values[i]
		res, over, why := Pair(metric, cells[i].Figure, best.Figure, higherIsBetter, g.VariancePct, g)
		dir := map[bool]string{true: "below", false: "above"}[higherIsBetter]
		what := fmt.Sprintf("%s %s on gpu %d is %.1f %% %s the best (gpu %d: %s)", metric, Num(cells[i].Value), cells[i].GPU, over, dir, best.GPU, Num(best.Value))
		switch {
		case res == Pass && why == "":
			cell.Reason = fmt.Sprintf("within %g %% of best (%.1f %% %s)", g.VariancePct, over, dir)
		case res == Pass:
			cell.Reason = what + ": not flagged, " + why
		case res == Inconclusive:
			cell.Inconclusive = true
			cell.Reason = what + ": inconclusive, not flagged: " + why
		default:
			cell.Flagged = true
			cell.Reason = what + fmt.Sprintf(", beyond the %g %% tolerance: check this card's clocks, power, PCIe link and NUMA binding", g.VariancePct)
		}
	}
	return c
}

func bestIndex(cells []Cell, higher bool) int {
	bi := 0
	for i, x := range cells {
		if (higher && x.Value > cells[bi].Value) || (!higher && x.Value < cells[bi].Value) {
			bi = i
		}
	}
	return bi
}

// lowConfidence marks c low-confidence when the smallest sample count of the cells (cells without
// one do not count) is under the minimum.
func lowConfidence(c *results.Compare, cells []Cell, min int) {
	weakest := -1
	for _, x := range cells {
		if x.Samples > 0 && (weakest < 0 || x.Samples < weakest) {
			weakest = x.Samples
		}
	}
	if min > 0 && weakest >= 0 && weakest < min {
		c.LowConfidence = true
		c.Note = joinNote(c.Note, fmt.Sprintf("low confidence: the weakest GPU's figure has %d requests behind it (< %d): a card with too few is not judged; %s", weakest, min, Tighten))
	}
}

// finiteCells drops NaN/Inf figures (they cannot be compared or written to JSON) and notes them.
func finiteCells(cells []Cell, c *results.Compare) []Cell {
	out := make([]Cell, 0, len(cells))
	for _, x := range cells {
		if math.IsNaN(x.Value) || math.IsInf(x.Value, 0) {
			c.Note = joinNote(c.Note, fmt.Sprintf("gpu %d has no finite value: left out", x.GPU))
			continue
		}
		out = append(out, x)
	}
	return out
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
