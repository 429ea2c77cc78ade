package health

import (
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// FromConfig turns the plan's health section into Options (for `gpuvet run`; its thresholds are
// judge.HealthRulesFrom's); source is "nvml",
// "nvidia-smi-xml" or "sim". health.gemm selects the GEMMs and health.pcie the pcie_* benchmarks; the
// on-card others (HBM) run with either.
func FromConfig(c config.Health, source string) Options {
	o := Options{
		Source: source, ExpectGPUs: c.ExpectGPUs,
		Burn: time.Duration(c.Burn), DCGM: c.DCGM.Enabled, DCGMLevel: c.DCGM.Level, DCGMTimeout: time.Duration(c.DCGM.Timeout), AllowBusy: c.AllowBusy,
	}
	o.Benchmarks = []string{}
	for _, name := range results.MicrobenchNames() {
		gemm, pcie := strings.Contains(name, "gemm"), strings.HasPrefix(name, "pcie_")
		if gemm && c.GEMM || pcie && c.PCIe || !gemm && !pcie && (c.GEMM || c.PCIe) {
			o.Benchmarks = append(o.Benchmarks, name)
		}
	}
	o.SkipBench = len(o.Benchmarks) == 0
	return o
}
