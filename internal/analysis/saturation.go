// Package analysis holds the pure functions over measured samples that the load generator, the
// importers and the judge share: sweep saturation and goodput SLOs. It imports only the results schema.
package analysis

import (
	"fmt"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// AnalyzeSaturation applies the sweep-saturation rules to the constant rungs' output tok/s (in rung order)
// and the saturated peak (the throughput probe's output tok/s). Either flag makes throughput a lower
// bound.
//
//   - truncated: the top constant rung is ≥ the saturated peak and > 1.05 × the rung below it (the
//     ladder was still climbing when it reached the probe: the probe under-measured).
//   - unsaturated: n ≥ 5 constant rungs, peak ≥ top rung and ≤ 1.25 × top rung, last delta > 0,
//     mean delta > 0, last delta ≥ 0.6 × mean delta with mean delta = (outs[n−2] − outs[0]) / (n−2),
//     and top rung > 1.05 × first rung (the last rungs still climb linearly while the peak sits just
//     above the ladder's tail: the ladder stopped below the knee).
func AnalyzeSaturation(rungs []float64, peak float64) results.Saturation {
	s := results.Saturation{Peak: peak, Rungs: append([]float64(nil), rungs...)}
	n := len(rungs)
	if n >= 2 {
		top, below := rungs[n-1], rungs[n-2]
		if top >= peak && top > 1.05*below {
			s.Truncated = true
			s.Reason = fmt.Sprintf("truncated: top rung %.0f tok/s ≥ probe peak %.0f and > 1.05 × the rung below (%.0f): the ladder was still climbing", top, peak, below)
		}
	}
	if n >= 5 {
		top := rungs[n-1]
		last, mean := top-rungs[n-2], (rungs[n-2]-rungs[0])/float64(n-2)
		if peak >= top && peak <= 1.25*top && last > 0 && mean > 0 && last >= 0.6*mean && top > 1.05*rungs[0] {
			s.Unsaturated = true
			s.Reason = strings.TrimPrefix(s.Reason+"; "+fmt.Sprintf("unsaturated: the last rungs still climb (last step %.0f tok/s vs mean step %.0f) and the probe peak %.0f sits within 1.25 × the top rung %.0f: the ladder stopped below the knee", last, mean, peak, top), "; ")
		}
	}
	return s
}
