package load

import "github.com/gpuvet/gpuvet/internal/results"

// Bounds that end a rung, as results.Run.EndedBy records them.
const (
	EndedByRequests    = "max_requests"
	EndedByDuration    = "max_duration"
	EndedByInterrupted = "interrupted"
	// EndedByErrors: the rung's errors decided it (results.Run.ErrorStop says how).
	EndedByErrors = "errors"
)

// endedBy says which bound ended a rung, so that a smaller sample than asked for is never silent.
func endedBy(o *rungOut) string {
	measured := 0
	for _, r := range o.recs {
		if !r.Warmup {
			measured++
		}
	}
	switch {
	case o.interrupted:
		return EndedByInterrupted
	case o.errStop != "":
		return EndedByErrors
	case o.spec.MaxRequests > 0 && measured >= o.spec.MaxRequests:
		return EndedByRequests
	case o.spec.Duration > 0:
		return EndedByDuration
	}
	return ""
}

// CutByDuration lists the rungs a duration ended before their request budget, for a warning.
func CutByDuration(l *results.Load) []int {
	var idx []int
	for i, r := range l.Runs {
		if l.Config.MaxRequests > 0 && r.EndedBy == EndedByDuration {
			idx = append(idx, i+1)
		}
	}
	return idx
}
