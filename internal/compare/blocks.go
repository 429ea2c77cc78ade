package compare

import (
	"math"
	"slices"

	"github.com/gpuvet/gpuvet/internal/metrics"
)

// Blocked comparison (issue 55). GPUs loaded at once share what drifts over a run (the host, the
// engine, the load generator), and a figure's interval holds that drift: a GPU 11 % slower under an
// engine wandering by a quarter reads "11 % [8 %, 27 %]", undecided. Where every GPU's rung ran in
// blocks started together, the gap is taken block by block, as a randomized complete block design
// does (Box, Hunter & Hunter, "Statistics for Experimenters", ch. 4): the drift cancels in each
// block's ratio. Its standard error comes from the GPU × block residuals of the additive fit on the
// log scale, (G − 1)(K − 1) degrees of freedom, its interval from Student's t.

// blockGap is a cell's gap to its peers measured block by block: the mean over the blocks of ln
// (how much worse than the peers' median in that block), its standard error and the t quantile of
// its 95 % interval.
type blockGap struct {
	log, se, t float64
}

// blockGaps are the cells' gaps block by block, or nil when the cells cannot be paired: fewer than
// two, fewer than three blocks, unequal block counts, a block that measured nothing, or a figure
// without an interval of its own (a tail from too few requests is not decided by its blocks
// either).
func blockGaps(cells []Cell, higher bool) []*blockGap {
	g := len(cells)
	if g < 2 {
		return nil
	}
	k := len(cells[0].Blocks)
	if k < 3 {
		return nil
	}
	y := make([][]float64, g)
	for i, c := range cells {
		if _, ok := LogSE(c.Figure); !ok || len(c.Blocks) != k {
			return nil
		}
		y[i] = make([]float64, k)
		for j, v := range c.Blocks {
			if !(v > 0) || math.IsInf(v, 0) {
				return nil
			}
			y[i][j] = math.Log(v)
		}
	}
	se := residualSD(y) * math.Sqrt(1/float64(k)+1/float64(k*(g-1)))
	t := metrics.StudentT975(min((g-1)*(k-1), 10)) // t(10) for more: a little wide, never narrow
	out := make([]*blockGap, g)
	for i := range y {
		var sum float64
		for j := range k {
			var peers []float64
			for h := range y {
				if h != i {
					peers = append(peers, y[h][j])
				}
			}
			d := y[i][j] - Median(peers) // ln(x ÷ the peers' median) in block j
			if higher {
				d = -d
			}
			sum += d
		}
		out[i] = &blockGap{log: sum / float64(k), se: se, t: t}
	}
	return out
}

// residualSD is the standard deviation of the residuals of the additive fit y[i][j] = row i +
// column j (GPU effect + block effect): what is left once each GPU's level and each block's drift
// are taken out, with (rows − 1)(columns − 1) degrees of freedom.
func residualSD(y [][]float64) float64 {
	g, k := len(y), len(y[0])
	row, col := make([]float64, g), make([]float64, k)
	var grand float64
	for i := range y {
		for j, v := range y[i] {
			row[i] += v / float64(k)
			col[j] += v / float64(g)
			grand += v / float64(g*k)
		}
	}
	var ss float64
	for i := range y {
		for j, v := range y[i] {
			e := v - row[i] - col[j] + grand
			ss += e * e
		}
	}
	return math.Sqrt(ss / float64((g-1)*(k-1)))
}

// withGaps gives each cell its block-by-block gap where the cells can be paired.
func withGaps(cells []Cell, higher bool) []Cell {
	gaps := blockGaps(cells, higher)
	if gaps == nil {
		return cells
	}
	cells = slices.Clone(cells)
	for i := range cells {
		cells[i].gap = gaps[i]
	}
	return cells
}
