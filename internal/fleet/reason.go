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
	// The hardware's findings first (what a gate acts on), each with its layer; then the rest.
	hardware := true
	flags := func(fs []results.Flag) {
		for _, f := range fs {
			if f.Layer != "" && results.HardwareLayer(f.Layer) != hardware {
				continue
			}
			what := f.Check
			if f.Layer != "" {
				what = "[" + f.Layer + "] " + what
			}
			if f.Subject != "" {
				add(what + " (" + f.Subject + "): " + f.Reason)
			} else {
				add(what + ": " + f.Reason)
			}
		}
	}
	add(h.Error)
	if a := h.Action; a != "" && a != results.ActionNone {
		add("action: " + results.ActionWords[a])
	}
	all := h.AllFlags()
	flags(all)
	hardware = false
	flags(all)
	if hh := h.Health; hh != nil {
		add(hh.Error)
	}
	for _, m := range h.Models {
		add(m.Error)
		for _, ep := range m.Endpoints {
			add(ep.Error)
		}
	}
	return strings.Join(r, "; ")
}
