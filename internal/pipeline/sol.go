package pipeline

import (
	"fmt"
	"math"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/roofline"
)

// speedOfLight holds the measured peak output tok/s against the roofline bound of this GPU × model
// at the batch the engine ran then. The batch is the mean number of requests in flight during the
// peak run (Little's law: completed req/s × mean end-to-end seconds), which is what a continuous-
// batching engine decodes together when nothing waits. nil when the peak, the GPU or the model is
// unknown; the reason is then in the returned note.
func speedOfLight(gpuName, model string, tp int, ld *results.Load) (*results.SpeedOfLight, string) {
	if ld == nil || len(ld.Runs) == 0 {
		return nil, ""
	}
	peak := ld.Runs[0]
	for _, r := range ld.Runs[1:] {
		if r.OutputTokS > peak.OutputTokS {
			peak = r
		}
	}
	if peak.OutputTokS <= 0 || peak.ReqS <= 0 || peak.E2E.Count == 0 || peak.MeanOutputTokens <= 0 {
		return nil, "speed-of-light: no completed requests at the peak"
	}
	g, ok := catalog.LookupGPU(gpuName)
	if !ok {
		return nil, fmt.Sprintf("speed-of-light: GPU %q is not in the catalog", gpuName)
	}
	m, src, ok := catalog.ResolveModel(model)
	if !ok {
		return nil, "speed-of-light: " + src
	}
	tp = max(1, tp)
	// The engine decodes the in-flight requests together; their mean context is the prompt plus half
	// the output. Prefill is left out, so the bound is an upper one.
	batch := peak.ReqS * peak.E2E.Mean / 1000
	b := max(1, int(math.Round(batch)))
	ctx := peak.MeanPromptTokens + peak.MeanOutputTokens/2
	bound := roofline.DecodeTokS(g, m, b, ctx, tp)
	if bound <= 0 || math.IsInf(bound, 0) || math.IsNaN(bound) {
		return nil, "speed-of-light: no bound (datasheet figures missing)"
	}
	limit := "memory"
	if roofline.ComputeBound(g, m, roofline.DecodeStep(b, ctx), tp) {
		limit = "compute"
	}
	return &results.SpeedOfLight{
		BoundOutputTokS: bound, MeasuredOutputTokS: peak.OutputTokS, Percent: 100 * peak.OutputTokS / bound,
		Limit: limit, Batch: batch,
		BatchSource:  fmt.Sprintf("mean requests in flight in the %s run (%.2f req/s × %.0f ms mean E2E), rounded to %d", runName(peak), peak.ReqS, peak.E2E.Mean, b),
		PromptTokens: peak.MeanPromptTokens, OutputTokens: peak.MeanOutputTokens, TP: tp, GPU: g.Key, Model: src,
	}, ""
}

func runName(r results.Run) string {
	switch {
	case r.Concurrency > 0:
		return fmt.Sprintf("%s c=%d", r.Kind, r.Concurrency)
	case r.TargetRate > 0:
		return fmt.Sprintf("%s %.2f/s", r.Kind, r.TargetRate)
	}
	return r.Kind
}
