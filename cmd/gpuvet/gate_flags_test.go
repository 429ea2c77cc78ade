package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The gate's flags set their config keys, and a circuit-breaker limit that is no count and no
// share is bad input (exit 2) naming the key and where it came from, before any cluster is asked.
func TestGateFlagsAndBadMaxUnhealthy(t *testing.T) {
	out, err := gpuvet("config", "show", "--backend", "kubernetes", "--image", "img", "--gate", "--dry-run", "--only-due",
		"--max-unhealthy", "5", "--verdict-valid-for", "24h", "--pending-retries", "2", "--priority-class", "gpuvet-low", "--acceptance").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"kubernetes.gate = true", "kubernetes.dry_run = true", "kubernetes.only_due = true", "kubernetes.max_unhealthy = 5",
		"kubernetes.verdict_valid_for = 24h0m0s", "kubernetes.pending_retries = 2", "kubernetes.priority_class = gpuvet-low", "run.acceptance = true"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("config show lacks %q:\n%s", w, out)
		}
	}
	for _, bad := range []string{"150%", "ten", "-1"} {
		cmd := gpuvet("run", "--backend", "kubernetes", "--image", "img", "--kubeconfig", filepath.Join(t.TempDir(), "none"),
			"--max-unhealthy", bad, "--out", filepath.Join(t.TempDir(), "out"))
		cmd.Env = append(cmd.Env, "GPUVET_STATE_DIR="+t.TempDir())
		b, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), "--max-unhealthy (kubernetes.max_unhealthy): want") {
			t.Errorf("--max-unhealthy %s: %v\n%s", bad, err, b)
		}
	}
}

// Backend slurm's breaker has its flag too: --max-drain sets slurm.max_drain, and a bad one is exit 2
// naming the flag and the key, before any Slurm command runs.
func TestSlurmMaxDrainFlag(t *testing.T) {
	out, err := gpuvet("config", "show", "--backend", "slurm", "--drain-failed", "--max-drain", "25%").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "slurm.max_drain = 25%") {
		t.Errorf("config show lacks slurm.max_drain = 25%%:\n%s", out)
	}
	cmd := gpuvet("run", "--backend", "slurm", "--drain-failed", "--max-drain", "ten", "--out", filepath.Join(t.TempDir(), "out"))
	cmd.Env = append(cmd.Env, "GPUVET_STATE_DIR="+t.TempDir())
	b, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(b), "--max-drain (slurm.max_drain): want") {
		t.Errorf("--max-drain ten: %v\n%s", err, b)
	}
}
