package judge

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// gpuVerdicts decides each GPU's status once, as the worst of its health verdict and the serving
// verdicts of the endpoints it ran: the verdict every surface shows for that GPU. A GPU that failed
// health is failed however well it then served; one whose GPU-to-GPU comparison could not decide is
// not ok.
func gpuVerdicts(h *results.Host) []results.GPUVerdict {
	byIndex := map[int]*results.GPUVerdict{}
	var order []int
	get := func(i int) *results.GPUVerdict {
		if v, ok := byIndex[i]; ok {
			return v
		}
		v := &results.GPUVerdict{Index: i}
		byIndex[i] = v
		order = append(order, i)
		return v
	}
	for _, g := range h.Discovery.GPUs {
		v := get(g.Index)
		v.UUID, v.Name = g.UUID, g.Name
	}
	if hh := h.Health; hh != nil {
		for _, g := range hh.GPUs {
			v := get(g.GPU.Index)
			if v.UUID == "" {
				v.UUID, v.Name = g.GPU.UUID, g.GPU.Name
			}
			st := g.Status
			if len(g.Flags) > 0 {
				st = results.Worse(st, results.StatusFlag)
			}
			for _, f := range g.Flags {
				v.Checks = appendNew(v.Checks, f.Check)
				if results.HardwareLayer(f.Layer) {
					v.Action = results.MoreDisruptive(v.Action, f.Action)
				}
			}
			for _, c := range hh.Comparisons {
				for _, cell := range c.Values {
					if cell.GPU == g.GPU.Index && cell.Flagged {
						st = results.Worse(st, results.StatusFlag)
						v.Checks = appendNew(v.Checks, "compare.health."+c.Metric)
					}
				}
			}
			v.Health = st
			if hh.Disruption != "" {
				v.Why = appendNew(v.Why, fmt.Sprintf("health: %s: not the GPU's: run again", hh.Disruption))
			}
		}
	}
	for _, m := range h.Models {
		for i := range m.Endpoints {
			ep := &m.Endpoints[i]
			for _, gi := range ep.GPUs {
				v := get(gi)
				if v.Name == "" {
					v.Name = ep.GPUName
				}
				if v.Serving == "" {
					v.Serving = ep.Status // not_run ranks below everything, but says more than nothing
				}
				v.Serving = results.Worse(v.Serving, ep.Status)
				for _, f := range ep.Flags {
					v.Checks = appendNew(v.Checks, f.Check)
				}
				if ep.Disruption != "" {
					v.Why = appendNew(v.Why, fmt.Sprintf("%s: %s: not the GPU's: run again", m.Model, ep.Disruption))
				}
				for _, vd := range ep.Verdicts {
					if vd.Result == ResultInconclusive {
						v.Why = appendNew(v.Why, fmt.Sprintf("%s: %s: %s", m.Model, vd.Rule, afterInconclusive(vd.Reason)))
					}
				}
			}
			// A comparison that could not decide about this GPU leaves its serving verdict undecided.
			for _, c := range m.Comparisons {
				for _, cell := range c.Values {
					if len(ep.GPUs) == 0 || cell.GPU != ep.GPUs[0] || !(cell.Inconclusive || c.LowConfidence) {
						continue
					}
					why := c.Note
					if cell.Inconclusive {
						why = afterInconclusive(cell.Reason)
					}
					for _, gi := range ep.GPUs {
						v := get(gi)
						if v.Serving == results.StatusOK {
							v.Serving = results.StatusInconclusive
						}
						v.Why = appendNew(v.Why, fmt.Sprintf("%s GPU-to-GPU %s: %s", m.Model, c.Metric, why))
					}
				}
			}
		}
	}
	sort.Ints(order)
	out := make([]results.GPUVerdict, 0, len(order))
	for _, i := range order {
		v := byIndex[i]
		v.Status = results.Worse(v.Health, v.Serving)
		if v.Serving == results.StatusNotRun && (v.Status == results.StatusOK || v.Status == "") {
			v.Status = results.StatusNotRun // healthy, but never served: not a pass
		}
		if v.Status == "" {
			v.Status = results.StatusSkipped
		}
		if v.Status != results.StatusInconclusive {
			v.Why = nil // decided: what left a figure open is in the caveats, not the verdict
		}
		out = append(out, *v)
	}
	return out
}

func appendNew(list []string, s string) []string {
	if s == "" || slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// afterInconclusive keeps the why of a reason ("… : inconclusive, <why>").
func afterInconclusive(r string) string {
	for _, sep := range []string{"inconclusive, not flagged: ", "inconclusive, ", "but inconclusive; "} {
		if _, why, ok := strings.Cut(r, sep); ok {
			return why
		}
	}
	return r
}
