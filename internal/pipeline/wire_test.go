package pipeline

import (
	"context"
	"strings"
	"testing"
)

// gpuvet run honours every health key as gpuvet health does: health.gemm=false runs no GEMM,
// health.pcie=false no pcie_* copy, and with both off no microbenchmark at all.
func TestRunHealthHonoursHealthKeys(t *testing.T) {
	for _, tc := range []struct {
		sets []string
		want string // the benchmarks that ran on GPU 0, in order
	}{
		{nil, "sgemm_fp32 gemm_tf32 gemm_bf16 pcie_h2d pcie_d2h hbm_d2d"},
		{[]string{"health.gemm=false"}, "pcie_h2d pcie_d2h hbm_d2d"},
		{[]string{"health.pcie=false"}, "sgemm_fp32 gemm_tf32 gemm_bf16 hbm_d2d"},
		{[]string{"health.gemm=false", "health.pcie=false"}, ""},
	} {
		p := quick(t, append([]string{"sim.gpus=1"}, tc.sets...)...)
		d := NewDeps(p.Config, nil, nil)
		src, name, err := d.Discover(context.Background(), p.Config)
		if err != nil {
			t.Fatal(err)
		}
		h := d.Health(context.Background(), src, name, p.Config)
		var ran []string
		for _, b := range h.GPUs[0].Bench {
			ran = append(ran, b.Name)
		}
		if got := strings.Join(ran, " "); got != tc.want {
			t.Errorf("%v: ran %q, want %q", tc.sets, got, tc.want)
		}
	}
}
