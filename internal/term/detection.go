package term

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// detectionLines say what a pass of this run means: per comparison (GPU to GPU per model, node to
// node, baseline per environment), the smallest slowdown it could have flagged, most sensitive
// metric first; a metric without an interval, or of a low-confidence comparison, has none.
func detectionLines(s *results.Summary) []string {
	out := perModel(s, func(m *results.Model) string {
		if l := caught(m.Comparisons, "caught a GPU ≥ %.1f %% slower in %s"); l != "" {
			return ", GPU to GPU: " + l
		}
		return ""
	})
	if s.Fleet != nil {
		if l := caught(s.Fleet.Comparisons, "caught a node ≥ %.1f %% slower in %s"); l != "" {
			out = append(out, "node to node: "+l)
		}
	}
	if b := s.Baseline; b != nil {
		for _, env := range b.Environments {
			var cs []results.Compare
			for met, d := range b.DetectablePct[env] {
				cs = append(cs, results.Compare{Metric: met, DetectablePct: d})
			}
			if l := caught(cs, "shown an overhead ≥ %.1f %% in %s"); l != "" {
				out = append(out, "baseline vs "+env+": "+l)
			}
		}
	}
	return out
}

// caught is "this run would have caught a GPU ≥ 10.4 % slower in tpot_p50_ms, ≥ 14.8 % in …", first
// is the phrase of the most sensitive metric (its percentage, then its name).
func caught(cs []results.Compare, first string) string {
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
	parts[0] = "this run would have " + fmt.Sprintf(first, ds[0].DetectablePct, ds[0].Metric)
	return strings.Join(parts, ", ")
}

// perModel is line(m) for every model of every host that gives one, after the model's name (and the
// host's, in a fleet).
func perModel(s *results.Summary, line func(m *results.Model) string) []string {
	var out []string
	for _, h := range s.Hosts {
		for mi := range h.Models {
			m := &h.Models[mi]
			subj := m.Model
			if s.Fleet != nil {
				subj = h.Name + " " + m.Model
			}
			if l := line(m); l != "" {
				out = append(out, subj+l)
			}
		}
	}
	return out
}
