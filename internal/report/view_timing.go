package report

import (
	"fmt"
	"strings"

	"github.com/gpuvet/gpuvet/internal/fleetview"
	"github.com/gpuvet/gpuvet/internal/results"
)

// timeToVet is the report's "Time to vet" section: the run's wall time and each phase's, how
// health and the engines ran across the GPUs (and why so many at once), and each engine's time on
// the hosts shown in full (a large fleet's others are counted).
func timeToVet(s *results.Summary, shown []results.Host) []kv {
	t := s.Timing
	if t == nil || len(t.Phases) == 0 {
		return nil
	}
	out := []kv{{"Total", fleetview.Seconds(t.TotalSeconds)}}
	for _, p := range t.Phases {
		out = append(out, kv{"Phase " + p.Phase, fleetview.PhaseSeconds(p)})
	}
	if c := s.Meta.Parallel; c != nil {
		out = append(out, kv{"GPUs at once", c.Reason})
	}
	for _, h := range shown {
		if h.Health == nil || len(h.Health.Timing) == 0 {
			continue
		}
		var steps []string
		for _, p := range h.Health.Timing {
			steps = append(steps, p.Phase+" "+fleetview.PhaseSeconds(p))
		}
		out = append(out, kv{label(s, h.Name, "Health steps"), strings.Join(steps, "; ")})
	}
	if n := len(s.Hosts) - len(shown); n > 0 {
		out = append(out, kv{"Other hosts", fmt.Sprintf("%d hosts not shown in full: each engine's time is in summary.json", n)})
	}
	for _, h := range shown {
		for _, m := range h.Models {
			for _, e := range m.Endpoints {
				if e.Timing != nil {
					out = append(out, kv{label(s, h.Name, fmt.Sprintf("%s on GPU %s", m.Model, gpuLabel(e.GPUs))), fleetview.EngineSeconds(e.Timing)})
				}
			}
		}
	}
	return out
}

func label(s *results.Summary, host, what string) string {
	if len(s.Hosts) > 1 {
		return host + ": " + what
	}
	return what
}
