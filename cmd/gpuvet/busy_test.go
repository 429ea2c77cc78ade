package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// runSim runs `gpuvet run --sim` in a child process (flags of one run never leak into another) with
// a short load, and returns its exit code, output and summary.
func runSim(t *testing.T, args ...string) (int, string, *results.Summary) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	base := []string{"run", "--sim", "--out", out, "--set", "load.max_duration=3s", "--set", "load.rates=1", "--set", "load.output_tokens=32",
		"--set", "load.max_concurrency=8", "--set", "functional.enabled=false"}
	b, err := gpuvet(append(base, args...)...).CombinedOutput()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(interface{ ExitCode() int }); ok {
			code = ee.ExitCode()
		}
	}
	var s results.Summary
	raw, rerr := os.ReadFile(filepath.Join(out, "summary.json"))
	if rerr != nil || json.Unmarshal(raw, &s) != nil {
		t.Fatalf("no summary (exit %d): %v\n%s", code, rerr, b)
	}
	return code, string(b), &s
}

// Issue 26: a simulated GPU shared with another process is flagged by `run --sim`, by name, at
// the health phase and before its engine; its sibling stays ok.
func TestRunSimBusyGPUIsFlagged(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	code, text, s := runSim(t, "--sim-gpus", "2", "--sim-cotenant", "1")
	if code != 0 || s.Status != results.StatusFlag {
		t.Fatalf("exit %d, status %s:\n%s", code, s.Status, text)
	}
	h := s.Hosts[0]
	if b := h.Health.GPUs[1].Busy; b == nil || !strings.Contains(b.Reason, "busy: PID 4242 python3, 8.1 GiB") {
		t.Errorf("health busy of gpu 1: %+v", b)
	}
	if h.Health.GPUs[0].Busy != nil || h.Health.GPUs[0].Status != results.StatusOK {
		t.Errorf("gpu 0 (alone): busy %+v, status %s", h.Health.GPUs[0].Busy, h.Health.GPUs[0].Status)
	}
	eps := h.Models[0].Endpoints
	if len(eps) != 2 || eps[1].Status != results.StatusFlag || len(eps[1].Busy) == 0 || eps[1].Busy[0].When != "before the engine" {
		t.Fatalf("endpoints: %+v", eps)
	}
	for _, want := range []string{"[health.busy] gpu 1", "[judge.busy] Qwen/Qwen3-8B on gpu 1: gpu 1 busy: PID 4242 python3", "[health.datasheet_floor] gpu 1"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, c := range h.Models[0].Comparisons {
		for _, cell := range c.Values {
			if cell.GPU == 1 {
				t.Errorf("the busy GPU is in the comparison %s: %+v", c.Metric, cell)
			}
		}
	}
}

// Issue 26: on a single GPU there is no sibling to compare with; a card at half its datasheet peaks
// is flagged by the floors alone.
func TestRunSimSingleSlowGPUIsFlagged(t *testing.T) {
	if testing.Short() {
		t.Skip("whole simulated runs (20-85 s each): go test without -short runs them")
	}
	t.Parallel()
	code, text, s := runSim(t, "--sim-gpus", "1", "--sim-straggler", "0", "--set", "sim.straggler_pct=38")
	if code != 0 || s.Status != results.StatusFlag {
		t.Fatalf("exit %d, status %s:\n%s", code, s.Status, text)
	}
	g := s.Hosts[0].Health.GPUs[0]
	under := 0
	for _, b := range g.Bench {
		if b.Ratio == nil || b.Floor == nil {
			t.Fatalf("%s: ratio %v floor %v", b.Name, b.Ratio, b.Floor)
		}
		if *b.Ratio < *b.Floor {
			under++
			if b.Status != results.StatusFlag {
				t.Errorf("%s at %.2f under %.2f: status %s", b.Name, *b.Ratio, *b.Floor, b.Status)
			}
		}
	}
	if under < 4 || g.Status != results.StatusFlag || !strings.Contains(text, "gemm_bf16 489 TFLOP/s is 0.49 of the 989 TFLOP/s datasheet peak, under its 0.55 floor") {
		t.Errorf("%d figures under their floor, gpu status %s:\n%s", under, g.Status, text)
	}
}

// --floor is checked before anything starts.
func TestHealthFloorFlag(t *testing.T) {
	b, err := gpuvet("health", "--sim", "--sim-gpus", "1", "--floor", "gemm_bf17=0.5").CombinedOutput()
	if err == nil || !strings.Contains(string(b), "--floor gemm_bf17: unknown benchmark") {
		t.Errorf("%v:\n%s", err, b)
	}
	// A healthy simulated GPU with a floor above what it measures is flagged for that one only.
	b, _ = gpuvet("health", "--sim", "--sim-gpus", "1", "--floor", "gemm_bf16=0.9").CombinedOutput()
	if n := strings.Count(string(b), "[health.datasheet_floor]"); n != 1 || !strings.Contains(string(b), "under its 0.90 floor") {
		t.Errorf("%d floor flags:\n%s", n, b)
	}
	b, _ = gpuvet("health", "--sim", "--sim-gpus", "1").CombinedOutput()
	if !strings.Contains(string(b), "health status: OK") {
		t.Errorf("a healthy simulated GPU:\n%s", b)
	}
}
