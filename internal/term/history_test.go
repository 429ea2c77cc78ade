package term

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The history block says each node's drift once per figure, counts its GPUs' drifts in the same
// figure, keeps a GPU's flag where its node's drift was only undecided, and lists a trend oldest
// first with the headline figures.
func TestHistoryBlockAndTrend(t *testing.T) {
	h := &results.History{Store: "sqlite /x/history.db", Fingerprint: "fp", DriftPct: 6, Recorded: &results.RecordedStats{Nodes: 1, GPUs: 2, Figures: 30},
		Drift: []results.Drift{
			{Scope: "node", Host: "n", Metric: "gemm_bf16", Result: "flag", Reason: "node n gemm"},
			{Scope: "gpu", Host: "n", GPU: 0, Metric: "gemm_bf16", Result: "flag", Reason: "gpu 0 gemm"},
			{Scope: "gpu", Host: "n", GPU: 1, Metric: "gemm_bf16", Result: "flag", Reason: "gpu 1 gemm"},
			{Scope: "gpu", Host: "n", GPU: 1, Model: "m", Metric: "tpot_p50_ms", Result: "flag", Reason: "gpu 1 tpot only"},
			{Scope: "node", Host: "n", Model: "m", Metric: "tpot_p50_ms", Result: "inconclusive", Reason: "node tpot undecided"},
			{Scope: "node", Host: "n", Metric: "hbm_d2d", Result: "pass"},
		}, Notes: []string{"a note"}}
	var b strings.Builder
	History(&b, h)
	out := b.String()
	for _, want := range []string{"DRIFT: node n gemm", "DRIFT: gpu 1 tpot only", "undecided: node tpot undecided", "2 GPU figure(s) drifted with their node's",
		"1 figure(s) within 6 %", "a note", "recorded in sqlite /x/history.db: 1 node(s), 2 GPU(s), 30 figures"} {
		if !strings.Contains(out, want) {
			t.Errorf("history block lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "gpu 0 gemm") || strings.Contains(out, "gpu 1 gemm") {
		t.Errorf("a GPU drift the node's already says is repeated:\n%s", out)
	}
	b.Reset()
	History(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no history printed %q", b.String())
	}
	t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	Trend(&b, []results.TrendPoint{
		{RunID: "r1", At: t0, Status: results.StatusOK, Other: true, Figures: map[string]float64{"m tpot_p50_ms": 6.62, "gemm_bf16": 786, "unlisted": 1}},
		{RunID: "r2", At: t0.Add(time.Hour), Status: results.StatusFlag, Figures: map[string]float64{"m tpot_p50_ms": 7.37}},
	})
	out = b.String()
	for _, want := range []string{"tpot_p50_ms", "gemm_bf16", "ok (other plan)", "7.37", "786"} {
		if !strings.Contains(out, want) {
			t.Errorf("trend lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "unlisted") || strings.Index(out, "r1") > strings.Index(out, "r2") {
		t.Errorf("trend:\n%s", out)
	}
}
