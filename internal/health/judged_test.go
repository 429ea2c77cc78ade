package health

import (
	"context"

	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// The health tests measure with Run and judge with judge.Health, as gpuvet does (health measures,
// judge decides): the flags they check are the judge's, named by its check ids.
const (
	CheckCount        = judge.CheckHealthCount
	CheckECC          = judge.CheckECC
	CheckRetired      = judge.CheckRetired
	CheckRemap        = judge.CheckRemap
	CheckPCIeWidth    = judge.CheckPCIeWidth
	CheckPCIeBW       = judge.CheckPCIeBW
	CheckClockEvents  = judge.CheckClockEvents
	CheckBurnClock    = judge.CheckBurnClock
	CheckXID          = judge.CheckXID
	CheckDCGM         = judge.CheckDCGM
	CheckCompare      = judge.CheckGPUToGPU
	CheckFloor        = judge.CheckFloor
	CheckBusy         = judge.CheckHealthBusy
	CheckNVLinkDown   = judge.CheckNVLinkDown
	CheckNVLinkErrors = judge.CheckNVLinkErrors
	CheckNVLinkPath   = judge.CheckNVLinkPath
	CheckP2PAccess    = judge.CheckP2PAccess
	CheckP2PBandwidth = judge.CheckP2PBandwidth
	CheckAllReduce    = judge.CheckAllReduce
	CheckLinkCompare  = judge.CheckLinkCompare
	CheckResults      = judge.CheckResults
)

// runJudged is the health phase as `gpuvet health` runs it: Run, then the judge's rules r.
func runJudged(ctx context.Context, src gpu.Source, bench BenchRunner, o Options, r judge.HealthRules) *results.Health {
	h := Run(ctx, src, bench, o)
	judge.Health(h, r)
	return h
}
