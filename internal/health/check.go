package health

import (
	"context"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Checker is a BenchRunner whose GEMMs check their own answers (internal/cuda's Runner: row
// checksums against the first result and a CPU tile; the simulator's SimBench). Runners without it
// leave Check nil and the result says the answers were not checked.
type Checker interface {
	CheckedMicrobench(ctx context.Context, g results.GPUInfo, name string) (float64, string, *results.ResultCheck, error)
	CheckedBurn(ctx context.Context, g results.GPUInfo) (float64, *results.ResultCheck, error)
}

// microbench runs one benchmark, checked where the runner can.
func microbench(ctx context.Context, bench BenchRunner, g results.GPUInfo, name string) (float64, string, *results.ResultCheck, error) {
	if c, ok := bench.(Checker); ok {
		return c.CheckedMicrobench(ctx, g, name)
	}
	v, unit, err := bench.Microbench(ctx, g, name)
	return v, unit, nil, err
}

// burn runs the burn, checked where the runner can.
func burn(ctx context.Context, bench BenchRunner, g results.GPUInfo) (float64, *results.ResultCheck, error) {
	if c, ok := bench.(Checker); ok {
		return c.CheckedBurn(ctx, g)
	}
	v, err := bench.Burn(ctx, g)
	return v, nil, err
}
