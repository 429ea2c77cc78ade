package judge

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"
)

// CheckExpected is the throughput verdict of a GPU × model with no throughput gate of its own: its
// peak against the expected figure derived from the catalog, or "not judged".
const CheckExpected = "gate.expected_output_tok_s"

// minFill is the least share of the engine's batch the load must keep in flight for the expected
// share to apply: healthy simulated H200s filled 18 of 32 (56 %) with the quick profile, where the
// share was measured; a profile capped at 8 in flight reached 28 % of the bound, healthy.
const minFill = 0.4

// expectedVerdict judges an endpoint's throughput against a reference even with no peer: a
// configured throughput gate does it already (nil here); else the roofline bound at the profile's
// batch × the engine's healthy share (HealthySOL), within compare.variance_pct. Without either it is
// not judged: inconclusive with no peer, disabled (results.SourceNone) with peers.
func expectedVerdict(ep *results.Endpoint, m *results.Model, peers bool, cfg Config) *results.Verdict {
	if ep.Load == nil || len(ep.Load.Runs) == 0 {
		return nil
	}
	g := cfg.GatesFor(ep.GPUName, m.Model)
	if g.MinThroughputReqS.Value != nil || g.AICRMinOutputTokS.Value != nil {
		return nil
	}
	peak, ok := peakFigure(ep.Load)
	if !ok {
		return nil
	}
	peak = acrossRuns(ep.Load, MetricPeakOutputTokS, peak) // a gate covers what a rerun would read
	n := int(val(cfg.CompareMinSamples))
	sol := ep.SpeedOfLight
	pct, where, known := HealthySOL(m.Engine.Kind, m.Engine.Version)
	// The healthy share was measured with the engine's batch well filled: a load that kept far fewer
	// sequences in flight reaches less of the bound however healthy the GPU. (An older summary's bound
	// without the batch reached says nothing of the fill: not applied.)
	filled := sol != nil && sol.ReachedBatch >= minFill*sol.Batch
	// A profile that sets its own pace (a rate, a concurrency, a trace) measures what that pace
	// asked for, not what the GPU can serve.
	paced := !seeksCapacity(ep.Load.Config.Profile)
	if known && sol != nil && sol.BoundOutputTokS > 0 && filled && !paced {
		margin := val(cfg.LLMVariancePct)
		exp := sol.BoundOutputTokS * pct / 100
		spec := GateSpec{Check: CheckExpected, Name: "peak output tok/s", Unit: "tok/s",
			Limit:  Limit{Value: f(exp), Source: fmt.Sprintf("expected: roofline %s tok/s at b=%.0f (%s × %s) × %s", fmtNum(sol.BoundOutputTokS), sol.Batch, sol.GPU, m.Model, where)},
			Factor: 1 - margin/100, FactorNote: fmt.Sprintf("the expected %s tok/s less the %g %% margin", fmtNum(exp), margin)}
		v := JudgeGate(spec, Measured{Present: true, Figure: peak}, n)
		return &v
	}
	var why string
	switch {
	case paced:
		why = fmt.Sprintf("the load profile %q sets its own pace and does not seek the GPU's capacity (profiles sweep and throughput do)", ep.Load.Config.Profile)
	case sol == nil || sol.BoundOutputTokS <= 0:
		why = "no roofline bound"
	case !known:
		why = fmt.Sprintf("no healthy share of the roofline measured for engine %s", strings.TrimSpace(m.Engine.Kind+" "+m.Engine.Version))
	default:
		why = fmt.Sprintf("the load kept %.1f of the engine's %.0f sequences in flight, under the %.0f %% the expected share is measured at (raise load.max_concurrency and load.rates)", sol.ReachedBatch, sol.Batch, minFill*100)
	}
	calibrate := fmt.Sprintf("run `gpuvet calibrate` on a healthy run of this GPU × model and add its reference entry (reference.%q.%q.min_throughput_req_s)", ep.GPUName, m.Model)
	v := &results.Verdict{Check: CheckExpected, Rule: "peak output tok/s against a reference", Unit: "tok/s", Value: f(peak.Value), Source: results.SourceNone}
	if peers {
		// The peers judge each GPU against the others; nothing judges them all: a node whose GPUs
		// are all equally slow passes GPU to GPU. Not a pass of this check: the run is partial.
		v.Result = ResultDisabled
		v.Reason = fmt.Sprintf("absolute throughput not judged, only GPU to GPU (GPUs all equally slow would pass): no reference for %s × %s, %s: %s",
			cmp.Or(ep.GPUName, "an unnamed GPU"), m.Model, why, calibrate)
		return v
	}
	v.Result = ResultInconclusive
	v.Reason = fmt.Sprintf("throughput not judged: no reference for %s × %s, no peer GPU, %s: %s, or vet it beside a sibling GPU", cmp.Or(ep.GPUName, "an unnamed GPU"), m.Model, why, calibrate)
	return v
}

// seeksCapacity reports whether a load profile drives the engine to what it can serve: a sweep
// (its probes and ladder) or the throughput profile; the others run at the pace they are given.
func seeksCapacity(profile string) bool { return profile == "sweep" || profile == "throughput" }

// markSOL says when an endpoint's % SOL is not the GPU's own: shared, or throttled during the load.
func markSOL(ep *results.Endpoint) {
	s := ep.SpeedOfLight
	if s == nil || s.BoundOutputTokS <= 0 {
		return
	}
	s.Marked = ""
	if SharedGPU(ep) {
		s.Marked = "busy: another process shared the GPU"
		return
	}
	for _, fl := range ep.Flags {
		if fl.Check == CheckThrottled || fl.Check == CheckLoadClockEvents {
			s.Marked = "throttled: " + fl.Reason
			return
		}
	}
}
