package judge

import (
	"slices"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A GPU failed by a break in its own words (the engine's, the health phase's) carries the check and
// the action of the finding that failed it: its verdict said failed with no action and no check,
// where the finding asked for reset-gpu (hosts[].gpus[].action, gpuvet_gpu_action, the report).
func TestGPUFailedByABreakCarriesItsAction(t *testing.T) {
	s := summary(healthy(), healthy())
	ep := &s.Hosts[0].Models[0].Endpoints[1]
	ep.Error, ep.LogTail = "engine exited 1", "RuntimeError: CUDA error: an illegal memory access was encountered"
	Apply(s, DefaultConfig())
	g := s.Hosts[0].GPUs[1]
	if g.Status != results.StatusFailed || g.Action != results.ActionResetGPU || !slices.Contains(g.Checks, "engine.serve") {
		t.Errorf("engine broke in the GPU's words: gpu 1 %s action %q checks %v, want failed, reset-gpu, engine.serve", g.Status, g.Action, g.Checks)
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
