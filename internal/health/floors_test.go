package health

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// occupied is a fake host whose GPU busyGPU has another process on it.
type occupied struct {
	*fakeSource
	busyGPU int
	reads   int
}

func (o *occupied) Occupancy(i int) (results.Occupancy, error) {
	o.reads++
	used, util, w, limit := int64(618), 0, 80.0, 700.0
	x := results.Occupancy{ProcessesListed: true, MemoryUsedMiB: &used, UtilPct: &util, PowerW: &w, PowerLimitW: &limit}
	if i == o.busyGPU {
		m := int64(8294)
		x.Processes = []results.GPUProcess{{PID: 4242, Name: "python3", Type: "compute", UsedMiB: &m}}
	}
	return x, nil
}

func TestBusyGPU(t *testing.T) {
	for _, allow := range []bool{false, true} {
		src := &occupied{fakeSource: newFake(2), busyGPU: 1}
		// The co-tenant halves GPU 1's figures: with --allow-busy they count (and fall under the
		// floors and the comparison); without, they are marked and kept out of the comparison.
		h := runJudged(context.Background(), src, fakeBench{slow: map[int]float64{1: 0.4}}, Options{Source: "nvml", AllowBusy: allow, BusyGap: time.Millisecond}, judge.HealthRules{})
		if src.reads != 6 {
			t.Errorf("allow %v: %d readings, want 3 per GPU", allow, src.reads)
		}
		g := h.GPUs[1]
		if g.Busy == nil || g.Busy.Reason != "busy: PID 4242 python3, 8.1 GiB" || g.Busy.Allowed != allow || h.GPUs[0].Busy != nil {
			t.Fatalf("allow %v: busy %+v", allow, g.Busy)
		}
		got := fmt.Sprint(flagsOf(h))
		if strings.Contains(got, CheckBusy) == allow || !strings.Contains(got, CheckFloor+"@1") || strings.Contains(got, "@0") {
			t.Errorf("allow %v: flags %s", allow, got)
		}
		if strings.Contains(got, CheckCompare) == !allow {
			t.Errorf("allow %v: a busy GPU's figures in the comparison: %s", allow, got)
		}
		for _, b := range g.Bench {
			if b.Busy == allow || b.Status != results.StatusFlag {
				t.Errorf("allow %v: %s busy %v status %s", allow, b.Name, b.Busy, b.Status)
			}
		}
		if h.Status != results.StatusFlag || h.GPUs[0].Status != results.StatusOK {
			t.Errorf("allow %v: status %s, gpu 0 %s", allow, h.Status, h.GPUs[0].Status)
		}
		// Judging again gives the same result.
		before := fmt.Sprint(flagsOf(h))
		judge.Health(h, judge.HealthRules{})
		if fmt.Sprint(flagsOf(h)) != before {
			t.Errorf("allow %v: Evaluate again: %v, was %s", allow, flagsOf(h), before)
		}
	}
}

// A single simulated GPU at half its datasheet peaks: no sibling to compare with, the floors alone
// flag it; the reference table (or --floor) moves a floor per GPU name.
func TestFloorsOnASingleGPU(t *testing.T) {
	run := func(r judge.HealthRules) *results.Health {
		// A fresh fleet each time: the last run's burn leaves the GPU loaded for a moment.
		fleet, err := sim.NewFleet(sim.FleetConfig{GPU: "H200", Count: 1, StragglerIndex: 0, StragglerPct: 38, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		o := Options{Source: "sim", Burn: 50 * time.Millisecond, SampleEvery: 10 * time.Millisecond}
		return runJudged(context.Background(), fleet, SimBench{Fleet: fleet}, o, r)
	}
	h := run(judge.HealthRules{})
	g := h.GPUs[0]
	floors, links := 0, 0
	for _, f := range g.Flags {
		switch f.Check {
		case CheckFloor:
			floors++
		case CheckPCIeBW:
			links++
		}
	}
	// The two PCIe copies under their floor are the link's (interconnect), the rest the GPU's.
	if h.Status != results.StatusFlag || floors != 4 || links != 2 || g.Burn.Ratio == nil || *g.Burn.Floor != results.MicrobenchFloors()[results.FloorBurn] {
		t.Fatalf("status %s, %d floor flags (want 3 of the GPU's benchmarks and the burn), %d PCIe flags (want 2), burn %+v: %v", h.Status, floors, links, g.Burn, flagsOf(h))
	}
	low := map[string]float64{}
	for _, n := range append(results.MicrobenchNames(), results.FloorBurn) {
		low[n] = 0.4
	}
	if h := run(judge.HealthRules{Floors: map[string]map[string]float64{"NVIDIA H200": low}}); h.Status != results.StatusOK {
		t.Errorf("floors 0.4 from the reference table: %s %v", h.Status, flagsOf(h))
	}
	if h := run(judge.HealthRules{Floors: map[string]map[string]float64{"NVIDIA H100 80GB HBM3": low}}); h.Status != results.StatusFlag {
		t.Errorf("another GPU's reference floors applied: %s", h.Status)
	}
	if h := run(judge.HealthRules{Floors: map[string]map[string]float64{"NVIDIA H200": low}, FloorOverrides: map[string]float64{"gemm_bf16": 0.6}}); len(h.GPUs[0].Flags) != 1 {
		t.Errorf("--floor gemm_bf16=0.6 over the table: %v", flagsOf(h))
	}
}
