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

// endedBy says which bound ended a rung: an operator who asked for N requests and got fewer learns
// that the duration cut them, instead of reading a silently smaller sample.
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
