package health

import (
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
)

// FromConfig turns the plan's health section into Options (for `gpuvet run`); source is "nvml",
// "nvidia-smi-xml" or "sim". health.gemm and health.pcie select the benchmarks; HBM runs with either.
func FromConfig(c config.Health, source string) Options {
	o := Options{
		Source: source, ExpectGPUs: c.ExpectGPUs, ExpectPCIeWidth: c.PCIeExpectedWidth, MinPCIeGBps: c.PCIeMinGBs,
		Burn: time.Duration(c.Burn), DCGM: c.DCGM.Enabled, DCGMLevel: c.DCGM.Level, DCGMTimeout: time.Duration(c.DCGM.Timeout),
	}
	o.Benchmarks = []string{}
	if c.GEMM {
		o.Benchmarks = append(o.Benchmarks, "sgemm_fp32", "gemm_tf32", "gemm_bf16")
	}
	if c.PCIe {
		o.Benchmarks = append(o.Benchmarks, "pcie_h2d", "pcie_d2h")
	}
	if c.GEMM || c.PCIe {
		o.Benchmarks = append(o.Benchmarks, "hbm_d2d")
	}
	o.SkipBench = len(o.Benchmarks) == 0
	return o
}
