package pipeline

import (
	"fmt"
	"math"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/roofline"
)

// solBatch is the batch % SOL is taken at: the engine's batch limit (max_num_seqs; vLLM's 256 when
// the plan does not say), which the sweep's open-loop rungs fill. Fixed by the plan, not the batch
// one run reached, so the same GPU gives the same % SOL run after run.
func solBatch(maxNumSeqs int) (int, string) {
	if maxNumSeqs <= 0 {
		return 256, "vLLM's default max_num_seqs 256 (the plan sets no other)"
	}
	return maxNumSeqs, fmt.Sprintf("the engine's max_num_seqs %d", maxNumSeqs)
}

// speedOfLight holds the measured peak output tok/s against the roofline bound of this GPU × model
// at solBatch and the profile's lengths, prefill included (roofline.ServeTokS), with the batch the
// peak reached (Little's law) beside it. nil when the peak, GPU or model is unknown: the note says.
func speedOfLight(cat *catalog.Catalog, gpuName, model string, tp int, ld *results.Load, batch int, batchSource string) (*results.SpeedOfLight, string) {
	if ld == nil || len(ld.Runs) == 0 {
		return nil, ""
	}
	peak := ld.Runs[0]
	for _, r := range ld.Runs[1:] {
		if r.OutputTokS > peak.OutputTokS {
			peak = r
		}
	}
	if peak.OutputTokS <= 0 {
		return nil, "speed-of-light: no output at the peak"
	}
	g, ok := cat.LookupGPU(gpuName)
	if !ok {
		return nil, fmt.Sprintf("speed-of-light: GPU %q is not in the catalog", gpuName)
	}
	m, src, ok := cat.ResolveModel(model)
	if !ok {
		return nil, "speed-of-light: " + src
	}
	tp = max(1, tp)
	prompt, output := float64(ld.Config.PromptTokens), float64(ld.Config.OutputTokens)
	if prompt <= 0 || output <= 0 { // a profile without lengths (a dataset): the peak run's means
		prompt, output = peak.MeanPromptTokens, peak.MeanOutputTokens
	}
	// The engine decodes the batch together at the mean context (the prompt plus half the output)
	// and computes each prompt once: the bound counts both (roofline.ServeTokS).
	ctx := prompt + output/2
	b := max(1, batch)
	bound := roofline.ServeTokS(g, m, b, int(math.Round(prompt)), int(math.Round(output)), tp)
	if bound <= 0 || math.IsInf(bound, 0) || math.IsNaN(bound) {
		return nil, "speed-of-light: no bound (datasheet figures missing)"
	}
	limit := "memory"
	if roofline.ComputeBound(g, m, roofline.DecodeStep(b, ctx), tp) {
		limit = "compute"
	}
	s := &results.SpeedOfLight{
		BoundOutputTokS: bound, MeasuredOutputTokS: peak.OutputTokS, Percent: 100 * peak.OutputTokS / bound,
		Limit: limit, Batch: float64(b), BatchSource: batchSource,
		PromptTokens: prompt, OutputTokens: output, TP: tp, GPU: g.Key, Model: src,
	}
	if peak.ReqS > 0 && peak.E2E.Count > 0 {
		s.ReachedBatch = peak.ReqS * peak.E2E.Mean / 1000
	}
	if s.Percent > 100 {
		s.Impossible = true
		s.Note = fmt.Sprintf("impossible: %.1f %% of the roofline bound: the datasheet, the model's architecture or the measured tok/s is wrong (a GPU cannot beat its speed of light)", s.Percent)
	}
	return s, ""
}
