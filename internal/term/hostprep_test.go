package term

import (
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 32: the terminal says per host what host preparation added and took away.
func TestHostPreparationLines(t *testing.T) {
	s := &results.Summary{Hosts: []results.Host{{Name: "gpu-a"}, {Name: "gpu-b", Prep: &results.HostPrep{
		Installed: []string{"nvidia-open=580.159.04-1"}, Removed: []string{"nvidia-open"},
		VFIO: []string{"restored 0000:41:00.0 to vfio-pci"}, RestoreError: "0000:42:00.0 still on nvidia"}}}}
	var sb strings.Builder
	Summary(&sb, s)
	out := sb.String()
	for _, want := range []string{"Host preparation", "gpu-b: installed nvidia-open=580.159.04-1; vfio: restored 0000:41:00.0 to vfio-pci; removed nvidia-open; vfio restore INCOMPLETE: 0000:42:00.0 still on nvidia"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "gpu-a:") {
		t.Errorf("a host without preparation has a line:\n%s", out)
	}
}
