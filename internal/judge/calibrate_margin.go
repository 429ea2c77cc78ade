package judge

import (
	"fmt"
	"io"
	"math"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Margin derivation (issue 35): compare.variance_pct, the interval rule's material margin, is half
// again the largest gap a healthy card showed against its peers' median, at least
// minCalibMarginPct(), so a card as far off as a healthy one never counts as material.

// minCalibMarginPct is the least margin calibrate derives: below it a margin is finer than the
// run-to-run noise of a whole host (the H200 pair measured 1.5 % apart).
func minCalibMarginPct() float64 { return results.DefaultOf(results.ThCalibMinMarginPct) }

// CalibMargin is the derived margin with the gap it came from.
type CalibMargin struct {
	Pct    float64 // the margin to set as compare.variance_pct
	GapPct float64 // the largest healthy gap
	Metric string
	Run    string
	GPU    int
	Gaps   int // how many judged figures were read
	// Notes say which GPUs were left out and why (calibUsable).
	Notes []string
}

// CalibrateMargin derives compare.variance_pct from the GPU-to-GPU comparisons of healthy runs; ok is
// false when no run has a comparison (one GPU per host, or no load).
func CalibrateMargin(runs []CalibRun) (CalibMargin, bool) {
	var m CalibMargin
	for _, run := range runs {
		for hi := range run.Summary.Hosts {
			h := &run.Summary.Hosts[hi]
			for _, all := range h.Models {
				mod, notes := usableModel(run, h, all)
				m.Notes = append(m.Notes, notes...)
				for _, c := range mod.Comparisons {
					if c.Against != compare.AgainstPeers || c.LowConfidence {
						continue
					}
					for _, v := range c.Values {
						if v.Inconclusive || v.Flagged { // a figure in doubt, or a flagged card, is not a healthy gap
							continue
						}
						m.Gaps++
						if g := math.Abs(v.DeltaPct); g > m.GapPct {
							m.GapPct, m.Metric, m.Run, m.GPU = g, c.Metric, run.Label, v.GPU
						}
					}
				}
			}
		}
	}
	if m.Gaps == 0 {
		return m, false
	}
	m.Pct = max(minCalibMarginPct(), math.Ceil(1.5*m.GapPct))
	return m, true
}

// WriteMarginYAML prints the derived margin as a compare.variance_pct to paste into a config, or a
// comment saying why there is none.
func WriteMarginYAML(w io.Writer, runs []CalibRun) error {
	m, ok := CalibrateMargin(runs)
	for _, n := range m.Notes {
		if _, err := fmt.Fprintf(w, "# compare.variance_pct: %s\n", n); err != nil {
			return err
		}
	}
	if !ok {
		_, err := fmt.Fprintln(w, "# compare.variance_pct: no GPU-to-GPU comparison in these runs (one GPU per host?): the default margin stays")
		return err
	}
	_, err := fmt.Fprintf(w, "# the largest gap of a healthy card to the median of its peers: %.1f %% (%s, %s gpu %d, of %d figures); the margin is 1.5 × it, at least %g %%\ncompare:\n  variance_pct: %g\n",
		m.GapPct, m.Metric, m.Run, m.GPU, m.Gaps, minCalibMarginPct(), m.Pct)
	return err
}
