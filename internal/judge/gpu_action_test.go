package judge

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A GPU failed by a break in its own words (the engine's, the health phase's) carries the check and
// the action of the finding that failed it: its verdict said failed with no action and no check,
// where the finding asked for reset-gpu (hosts[].gpus[].action, gpuvet_gpu_action, the report).
func TestGPUFailedByABreakCarriesItsAction(t *testing.T) {
	s := summary(healthy(), healthy())
	ep := &s.Hosts[0].Models[0].Endpoints[1]
	ep.Error, ep.LogTail = "engine exited 1", "RuntimeError: CUDA error: uncorrectable ECC error encountered"
	Apply(s, DefaultConfig())
	g := s.Hosts[0].GPUs[1]
	if g.Status != results.StatusFailed || g.Action != results.ActionResetGPU || !slices.Contains(g.Checks, "engine.serve") {
		t.Errorf("engine broke in the GPU's words: gpu 1 %s action %q checks %v, want failed, reset-gpu, engine.serve", g.Status, g.Action, g.Checks)
	}

	// A device fault in the engine's words (an illegal memory access: an engine's bad kernel as
	// readily as the GPU) leaves the GPU not proven, and the engine's finding asks for a rerun.
	s = summary(healthy(), healthy())
	ep = &s.Hosts[0].Models[0].Endpoints[1]
	ep.Error, ep.LogTail = "engine exited 1", "RuntimeError: CUDA error: an illegal memory access was encountered"
	Apply(s, DefaultConfig())
	g = s.Hosts[0].GPUs[1]
	if g.Status != results.StatusInconclusive || g.Action == results.ActionResetGPU || !strings.Contains(strings.Join(g.Why, " "), "rerun with a fresh engine") {
		t.Errorf("engine broke with a device fault: gpu 1 %s action %q why %q, want inconclusive, no GPU action, a rerun", g.Status, g.Action, g.Why)
	}
	if i := slices.IndexFunc(s.Findings, func(f results.Finding) bool { return f.Check == "engine.serve" }); i < 0 ||
		s.Findings[i].Layer != results.LayerEngine || s.Findings[i].Action != results.ActionRerun || s.Findings[i].Status != results.StatusFailed {
		t.Errorf("the device fault's finding: %+v", s.Findings)
	}

	s = summary(healthy())
	h := &s.Hosts[0]
	h.Health.Error, h.Health.Status = "gemm_bf16: CUDA error: an illegal memory access was encountered", results.StatusFailed
	h.Health.GPUs[0].Status, h.Health.GPUs[0].Bench = results.StatusFailed, nil
	Apply(s, DefaultConfig())
	if g := h.GPUs[0]; g.Status != results.StatusFailed || g.Action != results.ActionResetGPU || !slices.Contains(g.Checks, "health.error") {
		t.Errorf("health broke in the GPU's words: gpu 0 %s action %q checks %v, want failed, reset-gpu, health.error", g.Status, g.Action, g.Checks)
	}
}
