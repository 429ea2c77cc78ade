package main

import (
	"strconv"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The health and sim flags of health, run and sim default to the one home of those values
// (results.DefaultHealth, results.DefaultSim), as a plan's built-in defaults do.
func TestHealthAndSimFlagDefaultsAreTheSharedOnes(t *testing.T) {
	hd, sd := results.DefaultHealth(), results.DefaultSim()
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, tc := range []struct {
		cmd        string
		flag, want string
	}{
		{"health", "min-pcie-gbps", g(hd.MinPCIeGBps)}, {"health", "dcgm-level", strconv.Itoa(hd.DCGMLevel)},
		{"health", "dcgm-timeout", hd.DCGMTimeout.String()}, {"health", "gemm-variance-pct", g(hd.GEMMVariancePct)},
		{"health", "pcie-variance-pct", g(hd.PCIeVariancePct)}, {"health", "link-variance-pct", g(hd.LinkVariancePct)},
		{"health", "sim-gpu", sd.GPU}, {"health", "sim-gpus", strconv.Itoa(sd.GPUs)}, {"health", "sim-straggler-pct", g(sd.StragglerPct)},
		{"run", "sim-gpu", sd.GPU}, {"run", "sim-gpus", strconv.Itoa(sd.GPUs)},
		{"sim", "straggler-pct", g(sd.StragglerPct)},
	} {
		c, _, err := newRoot().Find([]string{tc.cmd})
		if err != nil {
			t.Fatal(err)
		}
		fl := c.Flags().Lookup(tc.flag)
		if fl == nil || fl.DefValue != tc.want {
			t.Errorf("gpuvet %s --%s: default %v, the shared default is %s", tc.cmd, tc.flag, fl, tc.want)
		}
	}
	c := config.Defaults()
	if c.Health.PCIeMinGBs != hd.MinPCIeGBps || c.Health.DCGM.Level != hd.DCGMLevel || c.Health.DCGM.Timeout.D() != hd.DCGMTimeout ||
		c.Compare.GEMMVariancePct != hd.GEMMVariancePct || c.Sim.GPU != sd.GPU || c.Sim.GPUs != sd.GPUs ||
		c.Sim.StragglerPct != sd.StragglerPct || c.Sim.Seed != sd.Seed {
		t.Errorf("config.Defaults does not read the shared health/sim defaults: %+v %+v", c.Health, c.Sim)
	}
}
