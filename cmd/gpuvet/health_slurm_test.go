package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `gpuvet health --slurm-drain` off a Slurm node (no scontrol, or one that knows no such node) is
// refused before the check starts, exit 2, saying where it belongs: it used to print "health
// status: OK", then scontrol's raw errors, and exit 1, which a Prolog's caller takes as "drain
// this node" (issue 51). A dry run is not checked.
func TestHealthSlurmDrainOffACluster(t *testing.T) {
	bin := t.TempDir()
	fake := filepath.Join(bin, "scontrol")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'slurm_load_partitions: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, path string }{{"no scontrol", t.TempDir()}, {"no controller", bin}} {
		cmd := gpuvet("health", "--sim", "--sim-gpus", "1", "--slurm-drain", "--slurm-node", "n1", "--burn", "1s")
		cmd.Env = append(cmd.Env, "PATH="+c.path)
		out, err := cmd.CombinedOutput()
		ee, _ := err.(*exec.ExitError)
		if ee == nil || ee.ExitCode() != 2 || !strings.Contains(string(out), "node n1 is not a Slurm node here") || strings.Contains(string(out), "health status") {
			t.Errorf("%s: %v\n%s", c.name, err, out)
		}
	}
	cmd := gpuvet("health", "--sim", "--sim-gpus", "1", "--slurm-drain", "--slurm-dry-run", "--slurm-node", "n1", "--burn", "1s")
	cmd.Env = append(cmd.Env, "PATH="+t.TempDir())
	// A dry run off a cluster is not refused, but it says a real one would be, not what it would do.
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "dry run: node n1 is not a Slurm node here") ||
		!strings.Contains(string(out), "would be refused") || strings.Contains(string(out), "would resume") || strings.Contains(string(out), ": )") {
		t.Errorf("dry run: %v\n%s", err, out)
	}
}
