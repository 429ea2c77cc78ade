package fleet

import (
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// HostReason is why a judged host is not ok, in one line (a taint's message, a drain's reason): its error and every flag's check,
// subject and reason (the host's, its health phase's and GPUs', its models' and endpoints'), without repeats.
func HostReason(h results.Host) string {
	var r []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(r, s) {
			r = append(r, s)
		}
	}
	flags := func(fs []results.Flag) {
		for _, f := range fs {
			if f.Subject != "" {
				add(f.Check + " (" + f.Subject + "): " + f.Reason)
			} else {
				add(f.Check + ": " + f.Reason)
			}
		}
	}
	add(h.Error)
	flags(h.Flags)
	if hh := h.Health; hh != nil {
		add(hh.Error)
		flags(hh.Flags)
		for _, g := range hh.GPUs {
			flags(g.Flags)
		}
	}
	for _, m := range h.Models {
		add(m.Error)
		flags(m.Flags)
		for _, ep := range m.Endpoints {
			add(ep.Error)
			flags(ep.Flags)
		}
	}
	return strings.Join(r, "; ")
}
