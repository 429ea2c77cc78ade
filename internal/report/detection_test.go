package report

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The report says what a pass of the interval rule means (issue 35): the comparison's margin against
// the median of the others, and the smallest slowdown the run could have caught; microbenchmark
// comparisons keep the seed's wording against the best.
func TestCompareTableStatesDetectableSlowdown(t *testing.T) {
	tb := compares([]results.Compare{
		{Metric: "tpot_p50_ms", VariancePct: 10, Against: "peers_median", DetectablePct: 10.4, Values: []results.CompareCell{{GPU: 0, Value: 6.6}, {GPU: 1, Value: 6.6}}},
		{Metric: "gemm_bf16", VariancePct: 25, HigherIsBetter: true, Values: []results.CompareCell{{GPU: 0, Value: 780}, {GPU: 1, Value: 790}}},
	})
	if r := tb.Rows[0].Rule; !strings.Contains(r, "within 10 % of the median of the others") || !strings.Contains(r, "would have caught one ≥ 10.4 % slower") {
		t.Errorf("interval rule row: %q", r)
	}
	if r := tb.Rows[1].Rule; !strings.Contains(r, "within 25 % of the best") || strings.Contains(r, "caught") {
		t.Errorf("microbenchmark row: %q", r)
	}
}
