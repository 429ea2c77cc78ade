package term

import (
	"fmt"
	"strings"

	"github.com/gpuvet/gpuvet/internal/fleetview"
	"github.com/gpuvet/gpuvet/internal/results"
)

// timeToVetLines are the terminal's "Time to vet" block: the run's wall time and each phase's, how
// the health steps and engines were scheduled across GPUs (and why so many at once), each engine's.
func timeToVetLines(s *results.Summary) []string {
	t := s.Timing
	if t == nil || len(t.Phases) == 0 {
		return nil
	}
	out := []string{"total " + fleetview.Seconds(t.TotalSeconds) + ": " + phaseList(t.Phases)}
	for _, h := range s.Hosts {
		if h.Health != nil && len(h.Health.Timing) > 0 {
			out = append(out, "health steps: "+phaseList(h.Health.Timing))
		}
	}
	if c := s.Meta.Parallel; c != nil {
		out = append(out, "GPUs at once: "+c.Reason)
	}
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				if e.Timing != nil {
					out = append(out, fmt.Sprintf("%s on gpu %s: %s", m.Model, GPUList(e.GPUs), fleetview.EngineSeconds(e.Timing)))
				}
			}
		}
	}
	return out
}

func phaseList(ps []results.PhaseTime) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Phase + " " + fleetview.PhaseSeconds(p)
	}
	return strings.Join(parts, " · ")
}
