package fleet

import (
	"fmt"
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
	// What left GPUs undecided (a client-limited load, too few samples): an inconclusive host with no
	// flag and no error said nothing at all ("needs a person: " with no reason).
	var whys []string
	gpusOf := map[string][]int{}
	for _, g := range h.GPUs {
		if g.Status != results.StatusInconclusive {
			continue
		}
		for _, w := range g.Why {
			if gpusOf[w] == nil {
				whys = append(whys, w)
			}
			gpusOf[w] = append(gpusOf[w], g.Index)
		}
	}
	for _, w := range whys {
		add("undecided on gpu " + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(gpusOf[w])), ","), "[]") + ": " + w)
	}
	return strings.Join(r, "; ")
}
