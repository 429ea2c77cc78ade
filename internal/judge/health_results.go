package judge

import (
	"fmt"

	"github.com/gpuvet/gpuvet/internal/results"
)

// CheckResults is the check id of a GEMM or burn whose answers were wrong (issue 33): it fails the
// GPU, whatever its speed.
const CheckResults = "health.result_check"

// judgeResultChecks fails a GPU whose burn or GEMM computed a wrong answer, with the count and
// when the first one came.
func judgeResultChecks(gh *results.GPUHealth, flag flagFunc) {
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
		s += paren(c.MismatchDetail)
	}
	if c.TileMismatches > 0 {
		if s != "" {
			s += "; "
		}
		s += fmt.Sprintf("the first result is wrong: %s", c.Tile)
	}
	return s
}
