package term

import (
	"fmt"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// repeatLines say, per model, the widest spread of each gated synchronous figure between its blocks
// (results.Repeat) over the GPUs, and on which: a figure that spread far will not repeat in the
// next run (docs/detection.md, "Figures that repeat").
func repeatLines(s *results.Summary) []string {
	return perModel(s, func(m *results.Model) string {
		if l := widestSpreads(m.Endpoints); l != "" {
			return ": " + l
		}
		return ""
	})
}

// widestSpreads is "itl_p95_ms 2.8 % (gpu 1), …" over the endpoints' synchronous rungs ("" when
// none ran in blocks).
func widestSpreads(eps []results.Endpoint) string {
	type widest struct {
		pct    float64
		gpus   []int
		blocks int
	}
	var order []string
	by := map[string]*widest{}
	for _, ep := range eps {
		if ep.Load == nil {
			continue
		}
		for _, r := range ep.Load.Runs {
			if r.Kind != "synchronous" || r.Repeat == nil {
				continue
			}
			for _, f := range r.Repeat.Figures {
				w := by[f.Figure]
				if w == nil {
					w = &widest{pct: -1}
					by[f.Figure] = w
					order = append(order, f.Figure)
				}
				if f.SpreadPct > w.pct {
					w.pct, w.gpus, w.blocks = f.SpreadPct, ep.GPUs, r.Repeat.Blocks
				}
			}
		}
	}
	if len(order) == 0 {
		return ""
	}
	parts := make([]string, len(order))
	for i, k := range order {
		w := by[k]
		parts[i] = fmt.Sprintf("%s %.1f %% (gpu %s)", k, w.pct, GPUList(w.gpus))
	}
	return fmt.Sprintf("spread between the synchronous rung's %d blocks, widest over the GPUs: %s", by[order[0]].blocks, strings.Join(parts, ", "))
}
