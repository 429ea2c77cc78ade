package judge

import (
	"fmt"

	"github.com/gpuvet/gpuvet/internal/results"
)

// CheckBusy flags an endpoint whose GPU was not gpuvet's alone: another process on it before the
// engine started or during the load, or load no process of gpuvet's accounted for.
const CheckBusy = "judge.busy"

// busyOf is the first busy record of an endpoint that --allow-busy did not allow (nil: none).
func busyOf(ep *results.Endpoint) *results.Busy {
	for i := range ep.Busy {
		if !ep.Busy[i].Allowed {
			return &ep.Busy[i]
		}
	}
	return nil
}

// SharedGPU reports whether an endpoint's figures were measured on a GPU another process shared
// (and --allow-busy did not allow it): such figures enter no comparison, GPU to GPU or node to node.
func SharedGPU(ep *results.Endpoint) bool { return busyOf(ep) != nil }

// busyVerdicts applies the busy rule to one endpoint: a flag per busy record, and no gate passes on
// figures a co-tenant shared (a pass becomes inconclusive; a fail stays, saying the GPU was shared).
func busyVerdicts(model string, ep *results.Endpoint) {
	b := busyOf(ep)
	if b == nil {
		return
	}
	for _, x := range ep.Busy {
		if x.Allowed {
			continue
		}
		when := x.When
		if x.T != nil {
			when = fmt.Sprintf("%s, %.0f s in", x.When, *x.T)
			if x.Rung != nil {
				when += fmt.Sprintf(", rung %d", *x.Rung+1)
			}
		}
		ep.Flags = append(ep.Flags, results.Flag{Scope: "gpu", Subject: subject(model, ep), Check: CheckBusy,
			Reason: fmt.Sprintf("%s (%s): the figures are not this GPU's alone and pass no gate or comparison; stop the other process, or pass --allow-busy to measure anyway", x.Reason, when)})
	}
	for i := range ep.Verdicts {
		v := &ep.Verdicts[i]
		switch v.Result {
		case ResultPass:
			v.Result = ResultInconclusive
			v.Reason = "the GPU was shared (" + b.Reason + "): a pass on shared figures says nothing of this GPU"
		case ResultFail:
			v.Reason += "; the GPU was shared then (" + b.Reason + ")"
		}
	}
}
