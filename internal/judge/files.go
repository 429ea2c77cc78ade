package judge

import (
	"github.com/gpuvet/gpuvet/internal/results"
)

// BaselineFor compares a finished run against a baseline read from path (gpuvet run --baseline
// FILE) and stores the comparison in s.Baseline; Apply then turns breaches into flags.
func BaselineFor(base *results.Summary, note, path string, s *results.Summary, cfg Config) {
	s.Baseline = baselineComparison(base, note, path, []*results.Summary{s}, cfg)
}

// CompareSummaries is `gpuvet compare`: the baseline read from basePath against the environments
// read from envPaths.
func CompareSummaries(base *results.Summary, note, basePath string, envs []*results.Summary, envPaths []string, cfg Config) *results.BaselineComparison {
	bc := baselineComparison(base, note, basePath, envs, cfg)
	bc.Environments, bc.EnvironmentFiles, bc.TolerancePct = envNames(envs), envPaths, val(cfg.BaselineTolerancePct)
	return bc
}

// baselineComparison compares envs against base, read from path (nil: unreadable, note says why).
func baselineComparison(base *results.Summary, note, path string, envs []*results.Summary, cfg Config) *results.BaselineComparison {
	bc := &results.BaselineComparison{Note: note}
	if base != nil {
		bc = CompareBaseline(base, envs, val(cfg.BaselineTolerancePct), cfg.LLMGuardsFrom())
	}
	bc.BaselineFile, bc.TolerancePctSrc = path, cfg.BaselineTolerancePct.Source
	return bc
}

// Breaches counts the breaching cells of a comparison.
func Breaches(bc *results.BaselineComparison) int { return len(BaselineFlags(bc)) }
