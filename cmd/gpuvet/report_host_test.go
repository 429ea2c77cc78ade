package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
