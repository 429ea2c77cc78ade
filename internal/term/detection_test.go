package term

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The terminal says what a pass means: per comparison, the detectable slowdown, most sensitive first;
// a comparison without one (no interval, a figure in doubt) is left out.
func TestDetectionLines(t *testing.T) {
	s := &results.Summary{
		Hosts: []results.Host{{Name: "h", Models: []results.Model{{Model: "m", Comparisons: []results.Compare{
			{Metric: "output_tok_s_peak", DetectablePct: 14.8}, {Metric: "tpot_p50_ms", DetectablePct: 10.4}, {Metric: "ttft_p95_ms"},
		}}}}},
		Baseline: &results.BaselineComparison{Environments: []string{"vm"}, DetectablePct: map[string]map[string]float64{"vm": {"sustained_req_s": 12}}},
	}
	got := strings.Join(detectionLines(s), "\n")
	want := "m, GPU to GPU: this run would have caught a GPU ≥ 10.4 % slower in tpot_p50_ms, ≥ 14.8 % in output_tok_s_peak\n" +
		"baseline vs vm: this run would have shown an overhead ≥ 12.0 % in sustained_req_s"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
