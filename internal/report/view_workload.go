package report

import (
	"fmt"
	"html/template"
	"slices"

	"github.com/gpuvet/gpuvet/internal/results"
)

// workloadCharts are a model's workload charts: TTFT against context length for long-context
// ladders (a hollow marker where the rung ran out of KV cache), and the prefix cache's measured hit rate
// beside the expected one where the workload shared prefixes. Empty for the seed's workload.
func workloadCharts(m results.Model) []template.HTML {
	return slices.DeleteFunc([]template.HTML{contextChart(m), prefixChart(m)}, func(c template.HTML) bool { return c == "" })
}

func contextChart(m results.Model) template.HTML {
	var ss []Series
	for _, e := range m.Endpoints {
		if e.Load == nil || e.Load.Context == nil {
			continue
		}
		s := Series{Name: gpuList(e.GPUs)}
		for _, r := range e.Load.Runs {
			if r.ContextTokens == 0 || r.TTFT.Count == 0 {
				continue
			}
			tip := fmt.Sprintf("%s: %d tokens × %d streams, TTFT p50 %s ms", s.Name, r.ContextTokens, e.Load.Context.Concurrency, num(r.TTFT.P50))
			if r.Preemptions != nil && *r.Preemptions > 0 {
				tip += fmt.Sprintf(", %.0f preemptions", *r.Preemptions)
			} else if r.KVBound() {
				tip += fmt.Sprintf(", requests held back for KV cache %.0f %% of the rung", *r.HeldShare*100)
			}
			s.Points = append(s.Points, Point{X: float64(r.ContextTokens), Y: r.TTFT.P50, Open: r.KVBound(), Tip: tip})
		}
		if len(s.Points) > 0 {
			ss = append(ss, s)
		}
	}
	if len(ss) == 0 {
		return ""
	}
	return LineChart{Title: "TTFT p50 vs context length (○ out of KV cache: the engine preempted or held requests back)", XLabel: "prompt tokens", YLabel: "TTFT p50 (ms)", Series: ss, Markers: true}.SVG()
}

func prefixChart(m results.Model) template.HTML {
	measured, expected := Series{Name: "measured (engine's counters)"}, Series{Name: "expected (an ideal cache)", Dashed: true}
	for _, e := range m.Endpoints {
		if e.Load == nil || e.Load.Server == nil || e.Load.Server.PrefixCache == nil || e.Load.Server.PrefixCache.Expected == nil || len(e.GPUs) == 0 {
			continue
		}
		pc, x := e.Load.Server.PrefixCache, float64(e.GPUs[0])
		measured.Points = append(measured.Points, Point{X: x, Y: pc.HitRate * 100, Tip: fmt.Sprintf("%s: %.1f %% of %.0f prompt tokens hit", gpuList(e.GPUs), pc.HitRate*100, pc.QueriedTokens)})
		expected.Points = append(expected.Points, Point{X: x, Y: *pc.Expected * 100, Open: true, Tip: fmt.Sprintf("%s: %.1f %% expected", gpuList(e.GPUs), *pc.Expected*100)})
	}
	if len(measured.Points) == 0 {
		return ""
	}
	return LineChart{Title: "Prefix-cache hit rate per GPU: measured vs expected", XLabel: "GPU", YLabel: "hit rate (%)", Series: []Series{measured, expected}, Markers: true}.SVG()
}
