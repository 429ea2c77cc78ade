package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 42: throughput is judged with no peer that differs. A single simulated card 20 % slow,
// and a node whose GPUs are all equally slow (an engine overhead on every step), end flag or
// inconclusive with the reason (flag on a quiet machine; inconclusive where a busy one left the
// client behind), where they ended ok; a healthy single card is not flagged.
func TestRunSimSlowWithoutAPeerIsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("whole simulated runs (20-85 s each): go test without -short runs them")
	}
	t.Parallel()
	for _, c := range []struct {
		name string
		args []string
		slow bool
	}{
		{"single card 20 % slow", []string{"--sim-gpus", "1", "--sim-straggler", "0", "--set", "sim.straggler_pct=20"}, true},
		{"uniformly slow node", []string{"--sim-gpus", "2", "--set", "sim.node_slowdown_pct=20"}, true},
		{"healthy single card", []string{"--sim-gpus", "1"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// The commands as written: the simulator's quick profile, where the expected
			// share was measured.
			out := filepath.Join(t.TempDir(), "out")
			b, _ := gpuvet(append([]string{"run", "--sim", "--out", out, "--set", "functional.enabled=false"}, c.args...)...).CombinedOutput()
			text := string(b)
			s, err := results.Read(filepath.Join(out, "summary.json"))
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			for _, g := range s.Hosts[0].GPUs {
				caught := slices.Contains(g.Checks, "gate.expected_output_tok_s") || strings.Contains(strings.Join(g.Why, " "), "expected")
				switch {
				case c.slow && !(g.Status == results.StatusFlag || g.Status == results.StatusInconclusive) || c.slow && !caught:
					t.Errorf("gpu %d: %s %v %v, want flag or inconclusive by the expected throughput:\n%s", g.Index, g.Status, g.Checks, g.Why, text)
				case !c.slow && g.Status == results.StatusFlag:
					t.Errorf("healthy gpu %d flagged: %v\n%s", g.Index, g.Checks, text)
				}
			}
			if c.slow && !strings.Contains(text, "expected") {
				t.Errorf("the terminal does not say why:\n%s", text)
			}
		})
	}
}

// Issue 42: `reference_floors: {"H200": {gemm_bf16: 1.4}}` was accepted and matched nothing (the
// detected name is "NVIDIA H200"): the run ended ok. The short name now reaches the GPU (its
// GEMM falls below a 1.4 floor: flagged); a key naming no GPU of the catalog is exit 2 with the
// closest name, before anything runs.
func TestRunSimGPUNamesUsersType(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end: go test without -short runs it")
	}
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "floors.yaml")
	if err := os.WriteFile(cfg, []byte("reference_floors:\n  H200:\n    gemm_bf16: 1.4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, text, s := runSim(t, "-c", cfg, "--sim-gpus", "1")
	g := s.Hosts[0].Health.GPUs[0]
	if g.Status != results.StatusFlag && g.Status != results.StatusFailed {
		t.Errorf("a 1.4 floor under the short name: health %s, want flag\n%s", g.Status, text)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("reference:\n  H2000:\n    Qwen/Qwen3-8B:\n      ttft_p95_ms: 100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out-bad")
	b, err := gpuvet("run", "--sim", "-c", bad, "--out", out).CombinedOutput()
	if ee, ok := err.(interface{ ExitCode() int }); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), `reference: "H2000" is not a GPU of the catalog: did you mean "H200"?`) {
		t.Errorf("unknown GPU key: %v\n%s", err, b)
	}
	if _, err := os.Stat(filepath.Join(out, "summary.json")); err == nil {
		t.Error("a run with a bad key started")
	}
}
