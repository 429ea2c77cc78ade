package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 46: the acceptance mode is a gate's contract: only ok exits 0, flag and failed exit 1,
// inconclusive exits 3 (its own code: neither a pass nor a finding). Without the mode the same
// runs keep the default codes (flag and inconclusive exit 0).
func TestRunAcceptanceExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("whole simulated runs (20-85 s each): go test without -short runs them")
	}
	t.Parallel()
	// The ok case is judged against a reference (a floor far under any run's), not the simulator's
	// expected share: on a starved machine the sweep may not keep enough sequences in flight to
	// judge that, and the case would read inconclusive for a reason the exit codes do not test.
	ref := filepath.Join(t.TempDir(), "ref.yaml")
	if err := os.WriteFile(ref, []byte("reference:\n  'NVIDIA H200':\n    'Qwen/Qwen3-8B':\n      min_throughput_req_s: 0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                 string
		args                 []string
		status               results.Status
		acceptance, default_ int
	}{
		{"ok", []string{"--sim-gpus", "1", "-c", ref}, results.StatusOK, 0, -1},
		// Nothing can reach the samples a gate needs: every gate is undecided. The rung cap at
		// load.max_duration: a rung sized by completions would otherwise run its 3 minutes after
		// samples it can never reach.
		{"inconclusive", []string{"--sim-gpus", "1", "--set", "compare.min_samples=100000", "--set", "load.max_rung_duration=3s"}, results.StatusInconclusive, 3, 0},
		// One card at 38 % below its peers' speed sits under its datasheet floors.
		{"flag", []string{"--sim-gpus", "1", "--sim-straggler", "0", "--set", "sim.straggler_pct=38"}, results.StatusFlag, 1, 0},
		// A card that computes wrong answers.
		{"failed", []string{"--sim-gpus", "2", "--sim-corrupt", "1", "--set", "health.burn=2s"}, results.StatusFailed, 1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, text, s := runSim(t, append([]string{"--acceptance"}, tc.args...)...)
			if s.Status != tc.status || code != tc.acceptance {
				t.Fatalf("--acceptance: status %s exit %d, want %s and %d:\n%s", s.Status, code, tc.status, tc.acceptance, text)
			}
			if tc.default_ < 0 {
				return
			}
			code, text, s = runSim(t, tc.args...)
			if s.Status != tc.status || code != tc.default_ {
				t.Errorf("without --acceptance: status %s exit %d, want %s and %d:\n%s", s.Status, code, tc.status, tc.default_, text)
			}
		})
	}
}
