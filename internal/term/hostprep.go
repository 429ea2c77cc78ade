package term

import (
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// prepLines are the terminal's "Host preparation" block: per host, what the run installed,
// released from vfio-pci, removed and restored, and what it left for `gpuvet clean`.
func prepLines(s *results.Summary) []string {
	var out []string
	for _, h := range s.Hosts {
		p := h.Prep
		if p == nil {
			continue
		}
		var parts []string
		add := func(what string, v []string) {
			if len(v) > 0 {
				parts = append(parts, what+" "+strings.Join(v, ", "))
			}
		}
		if p.Error != "" {
			parts = append(parts, "not prepared: "+p.Error)
		}
		add("installed", p.Installed)
		add("started", p.Started)
		add("vfio:", p.VFIO)
		add("removed", p.Removed)
		add("LEFT (gpuvet clean finishes it):", p.Left)
		if p.RestoreError != "" {
			parts = append(parts, "vfio restore INCOMPLETE: "+p.RestoreError)
		}
		if len(parts) == 0 {
			parts = append(parts, "nothing to add: used "+strings.Join(p.Used, ", "))
		}
		out = append(out, h.Name+": "+strings.Join(parts, "; "))
	}
	return out
}
