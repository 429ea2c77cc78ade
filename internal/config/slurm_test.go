package config

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// Bad slurm settings are refused before anything starts, naming the key.
func TestSlurmChecks(t *testing.T) {
	for set, key := range map[string]string{
		"slurm.max_drain=lots": "slurm.max_drain", "slurm.max_drain=120%": "slurm.max_drain", "kubernetes.max_unhealthy=0%": "kubernetes.max_unhealthy",
		"slurm.remote_backend=docker": "slurm.remote_backend", "slurm.shared_dir=rel/dir": "slurm.shared_dir",
		"slurm.time_limit=30s": "slurm.time_limit", "slurm.partition=a,b": "slurm.partition", "slurm.binary=gpuvet": "slurm.binary",
	} {
		_, err := Load(Options{Sets: []string{"backend=slurm", set}})
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("--set %s: %v, want an error naming %s", set, err, key)
		}
	}
	f := write(t, "ns.yaml", "backend: slurm\nslurm:\n  node_set:\n    gpu1: [\"sim.straggler\"]\n")
	if _, err := Load(Options{Files: []string{f}}); err == nil || !strings.Contains(err.Error(), "slurm.node_set") {
		t.Errorf("a node_set entry without = : %v", err)
	}
}

// A slurm fleet whose nodes run the simulator gets the simulator's short defaults (as ssh's), and
// the nodes' own plan is the remote backend's, with no slurm settings of this machine.
func TestSlurmSimPlan(t *testing.T) {
	p, err := Load(Options{Flags: []Flag{{Name: "--backend", Path: "backend", Value: "slurm"}, {Name: "--sim", Path: "slurm.remote_backend", Value: "sim"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Source("load.max_duration"), "default(sim)") {
		t.Errorf("load.max_duration from %s: want the simulator's default", p.Source("load.max_duration"))
	}
	b, err := p.RemoteYAML()
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Backend != "sim" || c.Slurm.RemoteBackend != "local" {
		t.Errorf("the nodes' plan: backend %q, slurm %+v", c.Backend, c.Slurm)
	}
}
