package health

import (
	"strings"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// FromConfig turns the plan's keys that the health phase reads into Options: the health section,
// engine.numa_bind and run.parallel_gpus (its thresholds are judge.HealthRulesFrom's). It is the one
// place `gpuvet run` (pipeline.NewDeps) turns a plan into health Options. source is "nvml",
// "nvidia-smi-xml" or "sim". health.gemm selects the GEMMs and health.pcie the pcie_* benchmarks; the
// on-card others (HBM) run with either. The caller adds what the plan cannot hold: the runners, the
// catalog, progress.
func FromConfig(c config.Config, source string) Options {
	h := c.Health
	o := Options{
		Source: source, ExpectGPUs: h.ExpectGPUs,
		Burn: h.Burn.D(), DCGM: h.DCGM.Enabled, DCGMLevel: h.DCGM.Level, DCGMTimeout: h.DCGM.Timeout.D(), AllowBusy: h.AllowBusy,
		NoNUMABind: !c.Engine.NUMABind,
		// Node scale: every GPU at once where nothing is shared (docs/node-scale.md), unless the
		// plan loads one GPU at a time, as the seed does.
		Parallel: c.Run.ParallelGPUs != 1,
	}
	o.Benchmarks = []string{}
	for _, name := range results.MicrobenchNames() {
		gemm, pcie := strings.Contains(name, "gemm"), strings.HasPrefix(name, "pcie_")
		if gemm && h.GEMM || pcie && h.PCIe || !gemm && !pcie && (h.GEMM || h.PCIe) {
			o.Benchmarks = append(o.Benchmarks, name)
		}
	}
	o.SkipBench = len(o.Benchmarks) == 0
	return o
}
