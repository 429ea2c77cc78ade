package health

import (
	"context"
	"testing"

	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// A GB200's GPUs have no PCIe host link (no datasheet figure): the PCIe benchmarks do not apply and
// are skipped, never failed — a healthy GB200 is ok (the aicr recipe's run ended failed on it).
func TestBenchmarkWithoutDatasheetFigureIsSkipped(t *testing.T) {
	f, err := sim.NewFleet(sim.FleetConfig{GPU: "GB200", Count: 2, StragglerIndex: -1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := runJudged(context.Background(), f, SimBench{Fleet: f}, Options{Source: "sim"}, judge.HealthRules{})
	if h.Status != results.StatusOK {
		t.Fatalf("healthy GB200s: status %s", h.Status)
	}
	for _, b := range h.GPUs[0].Bench {
		want := results.StatusOK
		if b.Name == "pcie_h2d" || b.Name == "pcie_d2h" {
			want = results.StatusSkipped
		}
		if b.Status != want {
			t.Errorf("%s: %s (%s%s), want %s", b.Name, b.Status, b.Error, b.Params, want)
		}
	}
}
