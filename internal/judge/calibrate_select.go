package judge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/compare"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Calibration learns only from health (issue 42): a run that is not ok is refused unless the
// operator names its GPUs (CalibRun.GPUs), and every table leaves out, saying so, each GPU not ok,
// busy or client-limited: a straggler that fed calibration would hide itself from then on.

// NotOK says why a run cannot feed calibration as a whole ("" when it can): its status, and which
// GPUs of it are ok, so the refusal says what --gpus could name.
func NotOK(s *results.Summary) string {
	if s.Status == results.StatusOK {
		return ""
	}
	var good, bad []string
	for _, h := range s.Hosts {
		for _, g := range h.GPUs {
			if g.Status == results.StatusOK {
				good = append(good, fmt.Sprint(g.Index))
			} else {
				bad = append(bad, fmt.Sprintf("gpu %d %s", g.Index, g.Status))
			}
		}
	}
	why := fmt.Sprintf("its status is %s, not ok", s.Status)
	if s.Status == "" {
		why = "it was never judged (no status), so nothing says it is healthy"
	}
	why += paren(strings.Join(bad, ", "))
	if len(good) > 0 {
		why += "; its ok GPUs are " + strings.Join(good, ",")
	}
	return why
}

// calibUsable says whether GPU gpu of host h may feed calibration from run, and why not: a verdict
// not ok, a GPU busy or flagged in health, or an endpoint on it not ok measured less than the card.
func calibUsable(run CalibRun, h *results.Host, gpu int) (bool, string) {
	if run.GPUs != nil && !slices.Contains(run.GPUs, gpu) {
		return false, "not among the GPUs named (--gpus)"
	}
	for _, v := range h.GPUs {
		if v.Index == gpu && v.Status != results.StatusOK {
			return false, fmt.Sprintf("its verdict is %s", v.Status) + paren(strings.Join(v.Checks, ", "))
		}
	}
	if h.Health != nil {
		if g := gpuAt(h.Health, gpu); g != nil && g.Busy != nil {
			return false, g.Busy.Reason
		} else if g != nil && (g.Status == results.StatusFailed || g.Status == results.StatusFlag || len(g.Flags) > 0) {
			return false, fmt.Sprintf("its health is %s", g.Status)
		}
	}
	return servingUsable(h, gpu)
}

// servingUsable says whether the endpoints on a GPU measured the card, and why not.
func servingUsable(h *results.Host, gpu int) (bool, string) {
	for _, m := range h.Models {
		for i := range m.Endpoints {
			switch ep := &m.Endpoints[i]; {
			case !slices.Contains(ep.GPUs, gpu):
			case SharedGPU(ep):
				return false, busyOf(ep).Reason
			case ep.Load != nil && ep.Load.Client.ClientLimited:
				return false, "the load generator was the bottleneck (client-limited)"
			case ep.Status == results.StatusFlag || ep.Status == results.StatusFailed || ep.Status == results.StatusInconclusive:
				return false, fmt.Sprintf("%s on it is %s", m.Model, ep.Status)
			}
		}
	}
	return true, ""
}

// endpointUsable says whether every GPU of an endpoint may feed calibration, and why not.
func endpointUsable(run CalibRun, h *results.Host, ep *results.Endpoint) (bool, string) {
	for _, g := range ep.GPUs {
		if ok, why := calibUsable(run, h, g); !ok {
			return false, why
		}
	}
	return true, ""
}

// usableModel is m with only the endpoints that may feed calibration (and why the others may not),
// its comparisons recomputed among them so a straggler does not move the healthy cards' median.
func usableModel(run CalibRun, h *results.Host, m results.Model) (results.Model, []string) {
	out := m
	out.Endpoints = nil
	var notes []string
	for i := range m.Endpoints {
		ep := m.Endpoints[i]
		if ok, why := endpointUsable(run, h, &ep); ok {
			out.Endpoints = append(out.Endpoints, ep)
		} else {
			notes = append(notes, fmt.Sprintf("%s %s left out: %s", run.Label, gpuList(ep.GPUs), why))
		}
	}
	out.Comparisons = ModelComparisons(&out, compare.LLMGuards(), false)
	return out, notes
}
