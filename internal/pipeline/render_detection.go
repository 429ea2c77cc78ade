package pipeline

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// detectionLines say what a pass of this run means (issue 35): per comparison, the smallest slowdown
// its samples and spread could have flagged, read from the summary (GPU to GPU per model, node to
// node, and the baseline's overhead per environment), the most sensitive metric first. A metric whose
// figures carry no interval, or whose comparison was low confidence, has no such figure and is left
// out. One small function of its own, so the terminal renderer can take it as it is.
func detectionLines(s *results.Summary) []string {
	var out []string
	for _, h := range s.Hosts {
		for _, m := range h.Models {
			subj := m.Model
			if s.Fleet != nil {
				subj = h.Name + " " + m.Model
			}
			if l := caught(m.Comparisons, "a GPU", "slower"); l != "" {
				out = append(out, subj+", GPU to GPU: "+l)
			}
		}
	}
	if s.Fleet != nil {
		if l := caught(s.Fleet.Comparisons, "a node", "slower"); l != "" {
			out = append(out, "node to node: "+l)
		}
	}
	if b := s.Baseline; b != nil {
		for _, env := range b.Environments {
			var cs []results.Compare
			for met, d := range b.DetectablePct[env] {
				cs = append(cs, results.Compare{Metric: met, DetectablePct: d})
			}
			if l := caught(cs, "an overhead", "worse"); l != "" {
				out = append(out, "baseline vs "+env+": "+l)
			}
		}
	}
	return out
}

// caught is "this run would have caught a GPU ≥ 10.4 % slower in tpot_p50_ms, ≥ 14.8 % in …".
func caught(cs []results.Compare, what, worse string) string {
	var ds []results.Compare
	for _, c := range cs {
		if c.DetectablePct > 0 {
			ds = append(ds, c)
		}
	}
	if len(ds) == 0 {
		return ""
	}
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].DetectablePct < ds[j].DetectablePct })
	parts := make([]string, len(ds))
	for i, c := range ds {
		parts[i] = fmt.Sprintf("≥ %.1f %% in %s", c.DetectablePct, c.Metric)
	}
	parts[0] = fmt.Sprintf("this run would have caught %s ≥ %.1f %% %s in %s", what, ds[0].DetectablePct, worse, ds[0].Metric)
	return strings.Join(parts, ", ")
}
