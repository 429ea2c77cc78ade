package judge

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuvet/gpuvet/internal/results"

	"github.com/gpuvet/gpuvet/internal/compare"
)

// Check ids of the load's error accounting: the gate (errors above the configured share fail the
// endpoint) and the flag any error raises below it. A failed request is never a silent pass.
const (
	CheckErrorRate  = "gate.error_rate"
	CheckLoadErrors = "judge.load_errors"
)

// ErrorCounts sums a load's measured requests and its errors by kind over every run.
func ErrorCounts(l *results.Load) (successful, errored int, byKind map[string]int) {
	byKind = map[string]int{}
	if l == nil {
		return 0, 0, byKind
	}
	for _, r := range l.Runs {
		successful += r.Requests.Successful
		errored += r.Requests.Errored
		for k, n := range r.Errors {
			byKind[k] += n
		}
	}
	return successful, errored, byKind
}

// ErrorKinds writes errors by kind, most frequent first: "http_500 250, cut_stream 161".
func ErrorKinds(byKind map[string]int) string {
	kinds := slices.Sorted(maps.Keys(byKind))
	slices.SortStableFunc(kinds, func(a, b string) int { return cmp.Compare(byKind[b], byKind[a]) })
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, byKind[k])
	}
	return strings.Join(parts, ", ")
}

// ErrorRateVerdict judges the share of failed requests of a load (over every run) against lim, a
// percentage: above it the verdict fails. Nil when the load measured no request (other gates say so).
func ErrorRateVerdict(l *results.Load, lim Limit) *results.Verdict {
	ok, bad, byKind := ErrorCounts(l)
	return errorRateVerdict(ok, bad, byKind, lim)
}

// errorRateVerdict judges bad failed requests of ok+bad against lim.
func errorRateVerdict(ok, bad int, byKind map[string]int, lim Limit) *results.Verdict {
	if ok+bad == 0 {
		return nil
	}
	share := 100 * float64(bad) / float64(ok+bad)
	v := JudgeGate(GateSpec{Check: CheckErrorRate, Name: "failed-request share", Unit: "%", Upper: true, Limit: lim},
		// A count of failures needs no sample guard: 3 failures of 3 requests are not inconclusive.
		Measured{Figure: compare.Figure{Value: share, Samples: ok + bad}, Present: true}, 0)
	what := fmt.Sprintf("%d of %d requests failed (%s %%)", bad, ok+bad, fmtNum(share))
	if bad > 0 {
		what += ": " + ErrorKinds(byKind)
	}
	switch v.Result {
	case ResultFail:
		v.Reason = fmt.Sprintf("%s, above %s %% (%s): the endpoint cannot serve this load; read the engine log and the records for the first errors",
			what, fmtNum(*v.Threshold), lim.Source)
	case ResultPass:
		v.Reason = fmt.Sprintf("%s, within %s %% (%s)", what, fmtNum(*v.Threshold), lim.Source)
	case ResultDisabled:
		v.Reason = what + "; " + v.Reason
	}
	return &v
}

// loadErrorFlag is the flag any failed request raises when the gate did not already fail: errors
// are never a silent pass, even below the share that fails the endpoint.
func loadErrorFlag(subject string, bad int, byKind map[string]int, v *results.Verdict) *results.Flag {
	if bad == 0 || (v != nil && v.Result == ResultFail) {
		return nil
	}
	return &results.Flag{Scope: "gpu", Subject: subject, Check: CheckLoadErrors,
		Reason: fmt.Sprintf("%d request(s) failed (%s): the figures cover only the successful ones; read the engine log for the cause", bad, ErrorKinds(byKind))}
}
