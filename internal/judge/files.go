package judge

import (
	"github.com/gpuvet/gpuvet/internal/results"
)

// BaselineFor compares a finished run against a baseline read from path (gpuvet run --baseline
// FILE; nil base: unreadable, note says why) and stores the comparison in s.Baseline; Apply then
// turns breaches into flags.
func BaselineFor(base *results.Summary, note, path string, s *results.Summary, cfg Config) {
	var bc *results.BaselineComparison
	if base == nil {
		bc = &results.BaselineComparison{Note: note}
	} else {
		bc = CompareBaseline(base, []*results.Summary{s}, val(cfg.BaselineTolerancePct), cfg.LLMGuardsFrom())
	}
	bc.BaselineFile, bc.TolerancePctSrc = path, cfg.BaselineTolerancePct.Source
	s.Baseline = bc
}

// CompareSummaries is `gpuvet compare`: the baseline read from basePath (nil: unreadable, note says
// why) against the environments read from envPaths.
func CompareSummaries(base *results.Summary, note, basePath string, envs []*results.Summary, envPaths []string, cfg Config) *results.BaselineComparison {
	var bc *results.BaselineComparison
	if base == nil {
		bc = &results.BaselineComparison{Note: note, Environments: envNames(envs)}
	} else {
		bc = CompareBaseline(base, envs, val(cfg.BaselineTolerancePct), cfg.LLMGuardsFrom())
	}
	bc.BaselineFile, bc.TolerancePct, bc.TolerancePctSrc = basePath, val(cfg.BaselineTolerancePct), cfg.BaselineTolerancePct.Source
	bc.EnvironmentFiles = envPaths
	return bc
}

// Breaches counts the breaching cells of a comparison.
func Breaches(bc *results.BaselineComparison) int { return len(BaselineFlags(bc)) }
