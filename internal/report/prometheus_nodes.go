package report

import (
	"slices"

	"github.com/gpuvet/gpuvet/internal/results"
)

// verdictStates are the states of the node verdict state set, in the order written.
var verdictStates = []results.Status{results.StatusOK, results.StatusInconclusive, results.StatusFlag, results.StatusFailed}

// promNodes writes each node's verdict as a state set (one series per status, 1 for the node's
// own: `gpuvet_node_verdict{status="failed"} == 1` alerts on a failed node, `== 1` joins with
// kube-state-metrics on node), and what the run did to the node (backend kubernetes: the
// verdict's expiry, a quarantine (a taint, a Slurm drain) the circuit breaker held, a pending
// node that needs a person).
func promNodes(d *promDoc, s *results.Summary) {
	for _, h := range s.Hosts {
		if !slices.Contains(verdictStates, h.Status) { // interrupted, not run: no verdict
			continue
		}
		f := d.family("gpuvet_node_verdict", "The node's judged verdict as a state set: 1 for its status (ok, inconclusive, flag, failed), 0 for the others.")
		for _, st := range verdictStates {
			f.add(b01(h.Status == st), "node", h.Name, "status", string(st))
		}
	}
	if s.Fleet == nil {
		return
	}
	held := 0.0
	for _, a := range s.Fleet.NodeActions {
		if a.ValidUntil != nil && !a.DryRun {
			d.family("gpuvet_node_verdict_expiry_timestamp_seconds", "Unix time the node's verdict expires (kubernetes.verdict_valid_for after the run): past it the node is due for a run.").
				add(float64(a.ValidUntil.Unix()), "node", a.Node)
		}
		held = max(held, b01(a.Held != ""))
		d.family("gpuvet_node_quarantine_held", "1 when the circuit breaker held the node's quarantine (a Kubernetes taint, a Slurm drain): the node failed but was not taken out of service.").add(b01(a.Held != ""), "node", a.Node)
		d.family("gpuvet_node_needs_attention", "1 when a pending node stayed undecided kubernetes.pending_retries runs in a row: it stays pending until a person looks.").add(b01(a.Attention != ""), "node", a.Node)
	}
	if len(s.Fleet.NodeActions) > 0 {
		d.family("gpuvet_circuit_breaker_tripped", "1 when the run's circuit breaker (kubernetes.max_unhealthy, slurm.max_drain) held a quarantine.").add(held)
	}
}
