package judge

import (
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// A GPU-to-GPU health flag lands on the GPU whose index the comparison named, not on the GPU at that
// position of the list: with indexes 1, 2, 3 (GPU 0 gone from the bus, or a subset vetted) a slow
// GPU 1 was flagged as GPU 2, a healthy card flagged on another's figures.
func TestHealthComparisonFlagsTheGPUByIndex(t *testing.T) {
	h := &results.Health{Source: "nvml"}
	for _, i := range []int{1, 2, 3} {
		v := 50.0
		if i == 1 {
			v = 20 // far below its peers
		}
		h.GPUs = append(h.GPUs, results.GPUHealth{GPU: results.GPUInfo{Index: i, Name: "NVIDIA H200", UUID: "GPU-" + string(rune('a'+i))},
			Bench: []results.Microbench{{Name: "sgemm_fp32", Value: v, Unit: "TFLOP/s", Status: results.StatusOK}}})
	}
	Health(h, HealthRules{FloorOverrides: map[string]float64{"sgemm_fp32": 0}})
	for _, gh := range h.GPUs {
		flagged := false
		for _, f := range gh.Flags {
			flagged = flagged || f.Check == CheckGPUToGPU
		}
		if want := gh.GPU.Index == 1; flagged != want {
			t.Errorf("gpu %d: GPU-to-GPU flag %v, want %v (%+v)", gh.GPU.Index, flagged, want, gh.Flags)
		}
	}
}

// A failed DCGM test lands on the GPU whose index it names, the same way: DCGM's GPU 1 of GPUs 1, 2,
// 3 was flagged on GPU 2.
func TestDCGMFailureFlagsTheGPUByIndex(t *testing.T) {
	h := &results.Health{Source: "nvml", DCGM: &results.DCGM{Status: results.StatusFailed, Level: 2, Tests: []results.DCGMTest{{Name: "Memory", GPU: new(1), Result: "fail", Info: "bad page"}}}}
	for _, i := range []int{1, 2, 3} {
		h.GPUs = append(h.GPUs, results.GPUHealth{GPU: results.GPUInfo{Index: i, Name: "NVIDIA H200"}})
	}
	Health(h, DefaultHealthRules())
	for _, gh := range h.GPUs {
		flagged := false
		for _, f := range gh.Flags {
			flagged = flagged || f.Check == CheckDCGM
		}
		if want := gh.GPU.Index == 1; flagged != want {
			t.Errorf("gpu %d: DCGM flag %v, want %v", gh.GPU.Index, flagged, want)
		}
	}
}
