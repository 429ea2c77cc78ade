package report

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The report shows each node's trend beside this run's figures (this run's row marked, a small
// line per figure) and every drift that did not pass, with its interval and the run it is against.
func TestHTMLHistoryTrendAndDrift(t *testing.T) {
	s := readSample(t)
	host := s.Hosts[0].Name
	t0 := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	s.History = &results.History{Store: "sqlite /var/lib/gpuvet/history.db", Fingerprint: "bd2d5d3e657acfa6", DriftPct: 6, DriftPctSource: "default",
		Trend: []results.TrendPoint{
			{Host: host, RunID: "r-accept", At: t0, Status: results.StatusOK, Figures: map[string]float64{"Qwen/Qwen3-8B tpot_p50_ms": 6.62, "gemm_bf16": 786}},
			{Host: host, RunID: "r-mid", At: t0.Add(24 * time.Hour), Status: results.StatusOK, Figures: map[string]float64{"Qwen/Qwen3-8B tpot_p50_ms": 6.97, "gemm_bf16": 747}},
			{Host: host, RunID: s.RunID, At: t0.Add(48 * time.Hour), Status: results.StatusFlag, Figures: map[string]float64{"Qwen/Qwen3-8B tpot_p50_ms": 7.37, "gemm_bf16": 707}},
		},
		Drift: []results.Drift{
			{Scope: "node", Host: host, GPU: -1, Model: "Qwen/Qwen3-8B", Metric: "tpot_p50_ms", Value: 7.37, Reference: 6.62, DeltaPct: 11.3,
				DeltaCI: &results.Interval{Lo: 11.1, Hi: 11.5, Level: 0.95}, AcceptanceRun: "r-accept", AcceptanceAt: t0, Result: "flag", Reason: "tpot drifted"},
			{Scope: "node", Host: host, GPU: -1, Metric: "pcie_h2d", Result: "pass", Reason: "within"},
		},
		Notes: []string{"gpu 1 (GPU-x) on " + host + " was on other-node in its acceptance run r-accept: it keeps its history (followed by UUID)"}}
	html := render(t, s)
	for _, want := range []string{"Each node against its own past", "Trend of " + host, s.RunID + " (this run)", `class="current"`, "<svg class=\"spark\"",
		"11.3 %", "[11.1 %, 11.5 %]", "r-accept (2026-11-01)", "1 figure(s) within the margin", "followed by UUID", "tpot_p50_ms", "bd2d5d3e657acfa6"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if i, j := strings.Index(html, "r-accept</td>"), strings.Index(html, s.RunID+" (this run)"); i < 0 || j < i {
		t.Errorf("the trend is not oldest first (%d, %d)", i, j)
	}
	s.History = nil
	if strings.Contains(render(t, s), "Each node against its own past") {
		t.Error("a run without history shows a history section")
	}
}
