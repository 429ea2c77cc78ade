package slurm

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuvet/gpuvet/internal/fleet"
)

// clean collects a job's partial results only into the run's own --out/hosts/NODE: a manifest
// naming another folder as local_out (edited, or a relative path of a run started elsewhere)
// never has that folder replaced.
func TestCleanCollectsOnlyIntoTheRunsOwnOut(t *testing.T) {
	out, wd, victim := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "summary.json"), []byte(`{"run_id":"R1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(wd, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wd, "out", "summary.json"), []byte(`{"complete":false}`), 0o644); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(victim, "precious")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := fleet.NewManifest(t.TempDir(), "slurm", "R1", map[string]string{"output": out})
	if err != nil {
		t.Fatal(err)
	}
	m.Record(fleet.Object{Kind: KindJob, Name: "11", Host: "n1", LocalOut: victim})
	s := &scriptedSlurm{answers: map[string]string{
		"scontrol -o show job 11": "JobId=11 JobName=gpuvet-R1-n1 JobState=COMPLETED Reason=None ExitCode=0:0 WorkDir=" + wd,
	}}
	_ = Clean(context.Background(), s, m, t.TempDir(), func(string) {})
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("clean replaced a folder the run never made (%s): %v", victim, err)
	}
	// The run's own folder is collected into.
	m2, _ := fleet.NewManifest(t.TempDir(), "slurm", "R1", map[string]string{"output": out})
	own := filepath.Join(out, fleet.HostsDir, "n1")
	m2.Record(fleet.Object{Kind: KindJob, Name: "11", Host: "n1", LocalOut: own})
	_ = Clean(context.Background(), s, m2, t.TempDir(), func(string) {})
	if _, err := os.Stat(filepath.Join(own, "summary.json")); err != nil {
		t.Fatalf("not collected into the run's own --out: %v", err)
	}
}

// The job's local_out is recorded absolute: `gpuvet clean` may run from another folder.
func TestJobLocalOutIsAbsolute(t *testing.T) {
	f, _ := hostsFleet(t, defaults(), map[string]string{"sbatch": "41\n", "scontrol release 41": ""})
	r := runInfo(t)
	r.Out = "relative-out"
	hs, _, err := f.Hosts(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if h := hs[0].(*Host); !filepath.IsAbs(h.localOut) {
		t.Fatalf("local_out %q", h.localOut)
	}
}
