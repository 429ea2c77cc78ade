package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/fleet"
	"github.com/gpuvet/gpuvet/internal/fleetview/synth"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 31: `gpuvet report --host NAME` writes the report of one node of a fleet in full; a name
// that is no host of the summary is bad input (exit 2), and the flag does not stick to the next run.
func TestReportCmdHost(t *testing.T) {
	src, err := results.Read("../../internal/report/testdata/sim8-summary.json")
	if err != nil {
		t.Fatal(err)
	}
	o := synth.Defaults()
	o.Nodes = 12
	s, err := synth.Fleet(src, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum := filepath.Join(dir, "summary.json")
	if err := results.WriteJSON(sum, s); err != nil {
		t.Fatal(err)
	}
	one := filepath.Join(dir, "one.html")
	if code := execute([]string{"report", sum, "--host", synth.NodeName(11), "--html", one}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	b, _ := os.ReadFile(one)
	if !strings.Contains(string(b), `id="host-`+synth.NodeName(11)+`"`) || strings.Contains(string(b), `id="fleet-map"`) || strings.Contains(string(b), `id="host-`+synth.NodeName(0)+`"`) {
		t.Error("the report of --host is not that one host's, in full")
	}
	if code := execute([]string{"report", sum, "--host", "gpu-node-99", "--html", one}); code != exitBadUsage {
		t.Errorf("an unknown host: exit %d, want %d", code, exitBadUsage)
	}
	all := filepath.Join(dir, "all.html")
	if code := execute([]string{"report", sum, "--html", all}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if b, _ := os.ReadFile(all); !strings.Contains(string(b), `id="fleet-map"`) {
		t.Error("--host stuck to the next report: the fleet's report has no fleet section")
	}
}

// Issue 31: a large fleet's summary.json holds digests; `gpuvet report` of its folder reads the hosts
// it renders in full (the worst 10, or those of --host) from hosts/NAME.json, so their sections are
// the run's own (microbenchmarks, speed of light), not their digests'.
func TestReportCmdReadsHostFiles(t *testing.T) {
	src, err := results.Read("../../internal/report/testdata/sim8-summary.json")
	if err != nil {
		t.Fatal(err)
	}
	o := synth.Defaults()
	o.Nodes = 12
	s, err := synth.Fleet(src, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := fleet.WriteSummary(dir, s, os.Stderr); err != nil {
		t.Fatal(err)
	}
	sum := filepath.Join(dir, "summary.json")
	if b, _ := os.ReadFile(sum); strings.Contains(string(b), "hbm_d2d") {
		t.Fatal("summary.json holds the microbenchmarks: not a digest")
	}
	one := filepath.Join(dir, "one.html")
	if code := execute([]string{"report", sum, "--host", synth.NodeName(11), "--html", one}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	b, _ := os.ReadFile(one)
	perHost := strings.Count(string(b), "hbm_d2d")
	if perHost == 0 {
		t.Error("the report of --host is the host's digest, not the host in full from its file")
	}
	all := filepath.Join(dir, "all.html")
	if code := execute([]string{"report", sum, "--html", all}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if b, _ := os.ReadFile(all); perHost == 0 || strings.Count(string(b), "hbm_d2d") != 10*perHost {
		t.Errorf("the fleet's report names hbm_d2d %d times, want its 10 hosts in full (%d times each)", strings.Count(string(b), "hbm_d2d"), perHost)
	}
}
