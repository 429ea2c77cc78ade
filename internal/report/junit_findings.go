package report

import (
	"slices"

	"github.com/gpuvet/gpuvet/internal/results"
)

// findingSuite holds one case per finding, worst first, classed by its layer (gpuvet.finding.engine):
// a failed or flagged one is a <failure> saying its layer, status and action, an inconclusive one a
// skip that ran and could not decide.
func findingSuite(s *results.Summary) junitSuite {
	su := junitSuite{Name: "gpuvet.findings"}
	for _, f := range worstFirst(s.Findings) {
		c := junitCase{Classname: "gpuvet.finding." + classPart(f.Layer), Name: f.Check, Subject: f.Subject}
		if f.Host != "" && len(s.Hosts) > 1 {
			c.Subject = f.Host + " " + f.Subject
		}
		line := f
		if len(s.Hosts) <= 1 {
			line.Host = "" // one host: its name says nothing (as the terminal says it)
		}
		msg := line.Line()
		switch f.Status {
		case results.StatusFailed, results.StatusFlag:
			c.Failure = &junitProblem{Message: msg, Type: "finding." + string(f.Status), Text: f.Reason}
		case results.StatusInconclusive:
			c.Skipped, c.Inconclusive = &junitSkip{Message: msg}, true
		default:
			c.Skipped = &junitSkip{Message: msg}
		}
		c.Extra = map[string]any{"layer": f.Layer, "status": string(f.Status), "action": f.Action, "check": f.Check}
		if f.Host != "" {
			c.Extra["node"] = f.Host
		}
		if len(f.GPUs) > 0 {
			c.Extra["gpus"] = f.GPUs
		}
		su.Cases = append(su.Cases, c)
	}
	return su
}

// findingOrder is the order surfaces list findings in: failed, flag, inconclusive, then anything else.
var findingOrder = []results.Status{results.StatusFailed, results.StatusFlag, results.StatusInconclusive}

// worstFirst are fs ordered failed, flag, then inconclusive (then any other status), each status
// in the judge's order.
func worstFirst(fs []results.Finding) []results.Finding {
	out := make([]results.Finding, 0, len(fs))
	for _, st := range findingOrder {
		for _, f := range fs {
			if f.Status == st {
				out = append(out, f)
			}
		}
	}
	for _, f := range fs {
		if !slices.Contains(findingOrder, f.Status) {
			out = append(out, f)
		}
	}
	return out
}

// layerMap is a layers map as plain strings, for a CTRF extra.
func layerMap(m map[string]results.Status) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}
