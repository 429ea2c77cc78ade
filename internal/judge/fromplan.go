package judge

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// FromPlan builds the judge's Config from a resolved plan: the gates and guards with each key's
// source, the reference table, and each named GPU's gates with its accelerators overlay applied
// (config.Plan.ForGPU), so the judge and the plan agree on which entry decided.
func FromPlan(p *config.Plan, gpuNames []string) Config {
	c, src := p.Config, sourceIn(p.Sources)
	cfg := DefaultConfig()
	cfg.Gates = gatesFrom(c.Gates, src)
	cfg.AICRTolerancePct = planLimit(results.ThAICRTolerancePct, f(c.Gates.AICRTolerancePct), src)
	cfg.AICRThroughputScope = cmp.Or(c.Gates.AICRThroughputScope, cfg.AICRThroughputScope)
	cfg.MaxErrorRatePct = planLimit(results.ThMaxErrorRatePct, c.Gates.MaxErrorRatePct, src)
	for key, v := range map[string]float64{ // the guards: 0 disables
		results.ThLLMVariancePct: c.Compare.VariancePct, results.ThGEMMVariancePct: c.Compare.GEMMVariancePct,
		results.ThMinSamples: float64(c.Compare.MinSamples), results.ThCompareMinReqS: c.Compare.MinThroughputReqS,
		results.ThMinTTFTDeltaMs: c.Compare.MinTTFTDeltaMs, results.ThBaselineTolerance: c.Compare.BaselineTolerancePc,
		results.ThDriftPct: c.History.DriftPct, results.ThPCIeMinGBps: c.Health.PCIeMinGBs,
	} {
		var p *float64
		if v > 0 {
			p = f(v)
		}
		*cfg.limitOf(key) = planLimit(key, p, src)
	}
	if len(c.Reference) > 0 {
		cfg.Reference = map[string]map[string]Override{}
		for gpu, models := range c.Reference {
			cfg.Reference[gpu] = map[string]Override{}
			for model, r := range models {
				cfg.Reference[gpu][model] = Override{TTFTP95Ms: r.TTFTP95Ms, ITLP95Ms: r.ITLP95Ms, MinThroughputReqS: r.MinThroughputReqS}
			}
		}
	}
	for _, name := range gpuNames {
		gc, gsrc, key := p.ForGPU(name)
		if key == "" {
			continue
		}
		if cfg.GPUGates == nil {
			cfg.GPUGates = map[string]Gates{}
		}
		cfg.GPUGates[name] = gatesFrom(gc.Gates, sourceIn(gsrc))
	}
	return cfg
}

// sourceIn reads a key's source from a plan's sources: "default" when it recorded none.
func sourceIn(sources map[string]string) func(string) string {
	return func(path string) string { return cmp.Or(sources[path], SourceDefault) }
}

// planLimit is the limit of a thresholds-table key with value v, the table's unit and the source
// the plan recorded for the key.
func planLimit(key string, v *float64, src func(string) string) Limit {
	return Limit{Value: v, Unit: results.ThresholdOf(key).Unit, Source: src(key)}
}

// gatesFrom is the config's gates as the judge's limits.
func gatesFrom(g config.Gates, src func(string) string) Gates {
	var out Gates
	for key, v := range map[string]*float64{results.ThTTFTP95Ms: g.TTFTP95Ms, results.ThITLP95Ms: g.ITLP95Ms,
		results.ThMinThroughputReqS: g.MinThroughputReqS, results.ThAICRMinOutputTokS: g.AICRMinOutputTokS,
		results.ThAICRMaxTTFTP99Ms: g.AICRMaxTTFTP99Ms} {
		*out.limit(key) = planLimit(key, v, src)
	}
	return out
}

// Fleet judges a merged fleet summary: node to node first, so that the roll-up Judge then makes of
// every host sees the node flags, then Judge.
func Fleet(s *results.Summary, plan *config.Plan) error {
	if s == nil || plan == nil {
		return fmt.Errorf("judge: no summary or no plan")
	}
	jc := FromPlan(plan, nil)
	CompareNodes(s, jc.LLMGuardsFrom(), jc.GEMMGuardsFrom())
	return Judge(s, plan)
}

// Judge is the pipeline's judge phase (pipeline.Deps.Judge): the plan's thresholds, resolved for
// every GPU name in the summary, applied to the whole summary.
func Judge(s *results.Summary, plan *config.Plan) error {
	if s == nil || plan == nil {
		return fmt.Errorf("judge: no summary or no plan")
	}
	cfg := FromPlan(plan, gpuNames(s))
	if err := cfg.Validate(); err != nil {
		return err
	}
	Apply(s, cfg)
	return nil
}

// Baseline is the step of `gpuvet run --baseline FILE`: it compares s against base (nil: unreadable,
// note says why; the run is not failed for it) and judges again so that breaches become flags.
func Baseline(s, base *results.Summary, note, baselinePath string, plan *config.Plan) error {
	if s == nil || plan == nil {
		return fmt.Errorf("baseline: no summary or no plan")
	}
	cfg := FromPlan(plan, gpuNames(s))
	BaselineFor(base, note, baselinePath, s, cfg)
	Apply(s, cfg)
	return nil
}

// gpuNames lists the distinct exact GPU names of a summary (discovery and endpoints), sorted.
func gpuNames(s *results.Summary) []string {
	seen := map[string]bool{}
	for _, h := range s.Hosts {
		for _, g := range h.Discovery.GPUs {
			seen[g.Name] = true
		}
		for _, m := range h.Models {
			for _, ep := range m.Endpoints {
				seen[ep.GPUName] = true
			}
		}
	}
	delete(seen, "")
	return slices.Sorted(maps.Keys(seen))
}
