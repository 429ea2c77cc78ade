package health

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
	"github.com/gpuvet/gpuvet/internal/term"
)

// checkedBench is fakeBench whose GEMMs check their answers; wrong[i] makes GPU i's burn mismatch
// from its second result on, and its gemm_bf16 mismatch.
type checkedBench struct {
	fakeBench
	wrong map[int]bool
}

func (b checkedBench) CheckedMicrobench(ctx context.Context, g results.GPUInfo, name string) (float64, string, *results.ResultCheck, error) {
	v, unit, err := b.Microbench(ctx, g, name)
	if !strings.Contains(name, "gemm") {
		return v, unit, nil, err
	}
	c := &results.ResultCheck{Method: "fake", Checked: 1}
	if b.wrong[g.Index] && name == "gemm_bf16" {
		c.Mismatches = 1
	}
	return v, unit, c, err
}

func (b checkedBench) CheckedBurn(ctx context.Context, g results.GPUInfo) (float64, *results.ResultCheck, error) {
	v, err := b.Burn(ctx, g)
	c := &results.ResultCheck{Method: "fake", Checked: 100}
	if b.wrong[g.Index] {
		at := time.Date(2026, 12, 1, 14, 2, 3, 0, time.UTC)
		c.Mismatches, c.FirstMismatchS, c.FirstMismatchAt = 99, new(0.25), &at
	}
	return v, c, err
}

// Issue 33: a GPU whose GEMMs compute wrong answers fails, with the count and when it started,
// whatever its speed; its sibling passes; the checks are kept in the result.
func TestWrongAnswersFailTheGPU(t *testing.T) {
	bench := checkedBench{wrong: map[int]bool{1: true}}
	h := runJudged(context.Background(), newFake(2), bench, Options{Source: "nvml", Burn: 300 * time.Millisecond, SampleEvery: 50 * time.Millisecond, DCGMBinary: "no-dcgmi-" + t.Name()}, judge.DefaultHealthRules())
	if h.GPUs[0].Status != results.StatusOK || h.GPUs[1].Status != results.StatusFailed || h.Status != results.StatusFailed {
		t.Fatalf("statuses %s %s host %s, flags %v", h.GPUs[0].Status, h.GPUs[1].Status, h.Status, flagsOf(h))
	}
	var reasons []string
	for _, f := range h.GPUs[1].Flags {
		if f.Check == CheckResults {
			reasons = append(reasons, f.Reason)
		}
	}
	if len(reasons) != 2 || !strings.Contains(reasons[0], "the burn computed wrong answers: 99 of 100 results differed from the first, the first 0.2 s in (14:02:03)") ||
		!strings.Contains(reasons[1], "gemm_bf16 computed a wrong answer: 1 of 1") {
		t.Errorf("reasons %q", reasons)
	}
	if c := h.GPUs[0].Burn.Check; c == nil || c.Checked != 100 || c.Mismatches != 0 {
		t.Errorf("gpu 0 burn check %+v", c)
	}
	for _, mb := range h.GPUs[0].Bench {
		if strings.Contains(mb.Name, "gemm") != (mb.Check != nil) {
			t.Errorf("%s: check %+v (GEMMs only)", mb.Name, mb.Check)
		}
	}
	var text strings.Builder
	term.Health(&text, h)
	if !strings.Contains(text.String(), "100 / 99") || !strings.Contains(text.String(), "WRONG") {
		t.Errorf("table lacks the mismatch counts:\n%s", text.String())
	}
}

// A wrong first result (the CPU tile disagrees) fails the GPU even when every later result equals it.
func TestWrongReferenceFailsTheGPU(t *testing.T) {
	gh := &results.GPUHealth{GPU: h200(0), Bench: []results.Microbench{{Name: "sgemm_fp32", Status: results.StatusOK,
		Check: &results.ResultCheck{Checked: 1, TileMismatches: 3, Tile: "64 elements …: 3 beyond tolerance"}}}}
	h := &results.Health{Source: "nvml", GPUs: []results.GPUHealth{*gh}}
	judge.Health(h, judge.DefaultHealthRules())
	if h.GPUs[0].Status != results.StatusFailed || !strings.Contains(h.GPUs[0].Flags[0].Reason, "the first result is wrong: 64 elements") {
		t.Fatalf("status %s flags %+v", h.GPUs[0].Status, h.GPUs[0].Flags)
	}
}

// The simulator's corrupt GPU: its burn mismatches from sim.CorruptFrom on, its siblings' never.
func TestSimCorruptGPU(t *testing.T) {
	f, err := sim.NewFleet(sim.FleetConfig{GPU: "H200", Count: 2, StragglerIndex: -1, Seed: 1, Corrupt: "0"})
	if err != nil {
		t.Fatal(err)
	}
	h := runJudged(context.Background(), f, SimBench{Fleet: f}, Options{Source: "sim", Benchmarks: []string{"gemm_bf16", "sgemm_fp32"}, Burn: 1500 * time.Millisecond, Parallel: true}, judge.DefaultHealthRules())
	bad, good := h.GPUs[0], h.GPUs[1]
	if bad.Status != results.StatusFailed || good.Status != results.StatusOK {
		t.Fatalf("statuses %s %s: %v", bad.Status, good.Status, flagsOf(h))
	}
	c := bad.Burn.Check
	if c == nil || c.Mismatches == 0 || c.FirstMismatchS == nil || *c.FirstMismatchS < sim.CorruptFrom.Seconds() || c.Checked < 500 {
		t.Errorf("corrupt burn check %+v", c)
	}
	if c := good.Burn.Check; c == nil || c.Mismatches != 0 || c.Checked < 500 {
		t.Errorf("healthy burn check %+v", c)
	}
	for _, mb := range bad.Bench {
		if (mb.Name == "gemm_bf16") != mb.Check.Failed() {
			t.Errorf("%s check %+v: only the BF16 GEMM is corrupt", mb.Name, mb.Check)
		}
	}
}
