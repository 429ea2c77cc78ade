package judge

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A GPU whose benchmark could not run, or whose burn broke, is failed only on its own words (a CUDA
// fault), and either way the break is a finding with its layer and action: the GPU was failed with
// no finding at all (no layer, no action: "cuBLAS not loadable" failed a healthy card).
func TestHealthBenchBreakNamesItsLayer(t *testing.T) {
	cases := []struct {
		name   string
		mod    func(gh *results.GPUHealth)
		layer  string
		status results.Status
		action string
	}{
		{"burn without telemetry: the host's", func(gh *results.GPUHealth) {
			gh.Burn = &results.Burn{Error: "no telemetry during the burn: nvml: Not Supported"}
		}, results.LayerHost, results.StatusInconclusive, ""},
		{"bench without its library: the host's", func(gh *results.GPUHealth) {
			gh.Bench[0].Status, gh.Bench[0].Error = results.StatusFailed, "cuBLAS not loadable (tried libcublas.so.12): install the CUDA toolkit's libcublas"
		}, results.LayerHost, results.StatusInconclusive, ""},
		{"bench in the GPU's words: the GPU's", func(gh *results.GPUHealth) {
			gh.Bench[0].Status, gh.Bench[0].Error = results.StatusFailed, "cuMemcpy: CUDA_ERROR_ECC_UNCORRECTABLE (214)"
		}, results.LayerGPU, results.StatusFailed, results.ActionResetGPU},
		{"burn in the GPU's words: the GPU's", func(gh *results.GPUHealth) {
			gh.Burn = &results.Burn{Error: "burn stopped after 12 s: cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (700)"}
		}, results.LayerGPU, results.StatusFailed, results.ActionResetGPU},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := summary(healthy(), healthy())
			h := &s.Hosts[0]
			c.mod(&h.Health.GPUs[1])
			Health(h.Health, DefaultHealthRules())
			Apply(s, DefaultConfig())
			g := h.GPUs[1]
			if g.Status != c.status || g.Action != c.action {
				t.Errorf("gpu 1: %s action %q why %q, want %s action %q", g.Status, g.Action, g.Why, c.status, c.action)
			}
			if c.status == results.StatusInconclusive && !strings.Contains(strings.Join(g.Why, " "), "not proven") {
				t.Errorf("gpu 1 why %q: says nothing of what left it not proven", g.Why)
			}
			if c.status == results.StatusFailed && !slices.Contains(g.Checks, "health.error") {
				t.Errorf("gpu 1 checks %v: lacks health.error", g.Checks)
			}
			found := false
			for _, f := range s.Findings {
				if f.Check == "health.error" && slices.Equal(f.GPUs, []int{1}) {
					found = true
					if f.Layer != c.layer || f.Action == "" || f.Status != results.StatusFailed {
						t.Errorf("finding %+v: want layer %s, an action, failed", f, c.layer)
					}
				}
			}
			if !found {
				t.Errorf("no finding for gpu 1's break: %+v", s.Findings)
			}
			if g := h.GPUs[0]; g.Status != results.StatusOK {
				t.Errorf("gpu 0: %s, want ok", g.Status)
			}
		})
	}
}
