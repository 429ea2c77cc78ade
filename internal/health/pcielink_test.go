package health

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/judge"
)

// A PCIe copy is measured against the link this host offers the card: a Gen4 slot is the host's
// design (a note, measured against Gen4), a slow copy on any link is the interconnect's finding
// (never the GPU's), and a VM's virtual root port that claims less than it carries bounds nothing.
func TestPCIeMeasuredAgainstTheHostLink(t *testing.T) {
	cases := []struct {
		name       string
		genMax     int
		widthMax   int
		gbps       float64
		peak       float64 // the peak the copy is measured against
		note       string  // a note that must be there ("" : no host-link note)
		wantChecks string
	}{
		{"Gen5 host, healthy", 5, 16, 55, 63.0, "", "[]"},
		{"Gen4 slot by design, healthy", 4, 16, 27, 31.5, "the host's PCIe link offers Gen4 x16, the H200 Gen5 x16", "[]"},
		{"Gen4 slot, slow copies", 4, 16, 12, 31.5, "offers Gen4 x16", "[" + CheckPCIeBW + " " + CheckPCIeBW + "]"},
		{"x8 slot by design", 5, 8, 27, 31.5, "offers Gen5 x8", "[]"},
		{"Gen5 host, link trained down under load", 5, 16, 27, 63.0, "", "[" + CheckPCIeBW + " " + CheckPCIeBW + "]"},
		{"VM root port claims Gen1 x1", 1, 1, 55, 63.0, "", "[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(1)
			f.gpus[0].PCIe.GenMax, f.gpus[0].PCIe.GenCurrent = c.genMax, c.genMax
			f.gpus[0].PCIe.WidthMax, f.gpus[0].PCIe.WidthCurrent = c.widthMax, c.widthMax
			h := runJudged(context.Background(), f, fakeBench{pcie: c.gbps}, Options{Source: "nvml", Benchmarks: []string{"pcie_h2d", "pcie_d2h"}}, judge.HealthRules{})
			g := h.GPUs[0]
			var checks []string
			for _, fl := range g.Flags {
				checks = append(checks, fl.Check)
				if !strings.Contains(fl.Reason, "nvidia-smi -q -d PCIE") {
					t.Errorf("%s: %q does not say what to check on the link", fl.Check, fl.Reason)
				}
			}
			if fmt.Sprint(checks) != c.wantChecks {
				t.Errorf("flags %v, want %s", checks, c.wantChecks)
			}
			for _, b := range g.Bench {
				if b.Peak == nil || *b.Peak < c.peak-0.1 || *b.Peak > c.peak+0.1 {
					t.Errorf("%s: peak %v, want %.1f GB/s", b.Name, b.Peak, c.peak)
				}
			}
			notes := strings.Join(g.Notes, "\n")
			if c.note != "" && !strings.Contains(notes, c.note) || c.note == "" && strings.Contains(notes, "host's PCIe link") {
				t.Errorf("notes %q, want %q", notes, c.note)
			}
		})
	}
}

// The clock-event reasons are read while each benchmark runs: a GPU the system's power brake slows
// during its GEMMs says so (bench[].clock_reasons), and its finding is the host's.
func TestBenchmarksRecordTheirClockReasons(t *testing.T) {
	f := newFake(1)
	f.reasons = gpu.ReasonHWPowerBrakeSlowdown | gpu.ReasonHWSlowdown
	h := runJudged(context.Background(), f, fakeBench{}, Options{Source: "nvml", Benchmarks: []string{"gemm_bf16"}}, judge.HealthRules{})
	g := h.GPUs[0]
	if len(g.Bench) != 1 || !slices.Contains(g.Bench[0].ClockReasons, "hw_power_brake_slowdown") {
		t.Fatalf("bench %+v, want the brake among its clock reasons", g.Bench)
	}
	if len(g.Flags) != 1 || g.Flags[0].Check != judge.CheckPowerBrake || g.Flags[0].Layer != "host" || !strings.Contains(g.Flags[0].Reason, "while gemm_bf16 ran") {
		t.Errorf("flags %+v, want the host's power-brake finding naming the benchmark", g.Flags)
	}
}
