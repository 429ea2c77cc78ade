package health

import (
	"context"
	"fmt"

	"github.com/gpuvet/gpuvet/internal/results"
)

// CheckResults is the check id of a GEMM or burn whose answers were wrong (issue 33): it fails the
// GPU, whatever its speed.
const CheckResults = "health.result_check"

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

// judgeResultChecks fails a GPU whose burn or GEMM computed a wrong answer, with the count and
// when the first one came.
func judgeResultChecks(gh *results.GPUHealth, flag func(check, format string, args ...any)) {
	if b := gh.Burn; b != nil && b.Check.Failed() {
		flag(CheckResults, "the burn computed wrong answers: %s: the GPU is not fit to serve; drain it, run `dcgmi diag -r 3` and RMA it if it recurs", describeMismatch(b.Check))
	}
	for _, mb := range gh.Bench {
		if mb.Check.Failed() {
			flag(CheckResults, "%s computed a wrong answer: %s: the GPU is not fit to serve; drain it, run `dcgmi diag -r 3` and RMA it if it recurs", mb.Name, describeMismatch(mb.Check))
		}
	}
}

// describeMismatch says how many results differed and when the first did.
func describeMismatch(c *results.ResultCheck) string {
	s := ""
	if c.Mismatches > 0 {
		s = fmt.Sprintf("%d of %d results differed from the first", c.Mismatches, c.Checked)
		if c.FirstMismatchS != nil {
			s += fmt.Sprintf(", the first %.1f s in", *c.FirstMismatchS)
			if c.FirstMismatchAt != nil {
				s += " (" + c.FirstMismatchAt.Format("15:04:05") + ")"
			}
		}
		if c.MismatchDetail != "" {
			s += " (" + c.MismatchDetail + ")"
		}
	}
	if c.TileMismatches > 0 {
		if s != "" {
			s += "; "
		}
		s += fmt.Sprintf("the first result is wrong: %s", c.Tile)
	}
	return s
}
