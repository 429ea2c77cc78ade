package report

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 32: the report shows what host preparation installed, removed, released and restored; an
// incomplete vfio restore is open and said; a host without preparation has no such block.
func TestHTMLHostPreparation(t *testing.T) {
	s := readSample(t)
	if strings.Contains(render(t, s), "Host preparation") {
		t.Fatal("a host without preparation got the block")
	}
	s.Hosts[0].Prep = &results.HostPrep{
		Used:       []string{"numactl"},
		Installed:  []string{"nvidia-open=580.159.04-1", "datacenter-gpu-manager-4-cuda13=1:4.4.1-1"},
		Started:    []string{"nv-hostengine"},
		Removed:    []string{"nvidia-open", "datacenter-gpu-manager-4-cuda13", "nv-hostengine (stopped)"},
		Autoremove: "ran: the host had nothing autoremovable before",
		VFIO:       []string{"released 0000:41:00.0 from vfio-pci (override lifted)", "restored 0000:41:00.0 to vfio-pci (persistent override)"},
	}
	out := render(t, s)
	for _, want := range []string{"Host preparation", "used (untouched)", "numactl", "installed", "nvidia-open=580.159.04-1",
		"started", "nv-hostengine", "removed after", "autoremove", "released 0000:41:00.0 from vfio-pci", "restored 0000:41:00.0 to vfio-pci"} {
		if !strings.Contains(out, template_escape(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	s.Hosts[0].Prep.RestoreError = "0000:41:00.0 still on nvidia"
	s.Hosts[0].Prep.Left = []string{"nvidia-open"}
	out = render(t, s)
	for _, want := range []string{"vfio restore INCOMPLETE", "0000:41:00.0 still on nvidia", "left behind (gpuvet clean finishes it)"} {
		if !strings.Contains(out, template_escape(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	if !strings.Contains(out, `<details class="sec" open>
    <summary><h3>Host preparation`) {
		t.Error("an incomplete restore does not open the block")
	}
}
