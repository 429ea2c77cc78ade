package report

import (
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Issue 46: per node, the verdict as a state set, its expiry, and what the breaker held; a
// dry run's expiry is not one (nothing was written on the node).
func TestPrometheusNodeVerdicts(t *testing.T) {
	until := time.Date(2026, 12, 10, 3, 0, 0, 0, time.UTC)
	s := &results.Summary{RunID: "r", Status: results.StatusFailed, Complete: true,
		Hosts: []results.Host{{Name: "n1", Status: results.StatusOK}, {Name: "n2", Status: results.StatusFailed}, {Name: "n3", Status: results.StatusInconclusive},
			{Name: "n4", Status: results.StatusNotRun}},
		Fleet: &results.Fleet{NodeActions: []results.NodeAction{
			{Node: "n1", Status: results.StatusOK, ValidUntil: &until},
			{Node: "n2", Status: results.StatusFailed, ValidUntil: &until, Held: "would have tainted gpuvet.io/unhealthy=r:NoSchedule"},
			{Node: "n3", Status: results.StatusInconclusive, ValidUntil: &until, Attention: "undecided 3 runs in a row"},
		}}}
	b, err := Prometheus(s)
	if err != nil {
		t.Fatal(err)
	}
	fams := parseProm(t, b)
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gpuvet_node_verdict", map[string]string{"node": "n1", "status": "ok"}, 1},
		{"gpuvet_node_verdict", map[string]string{"node": "n1", "status": "failed"}, 0},
		{"gpuvet_node_verdict", map[string]string{"node": "n2", "status": "failed"}, 1},
		{"gpuvet_node_verdict", map[string]string{"node": "n2", "status": "ok"}, 0},
		{"gpuvet_node_verdict", map[string]string{"node": "n3", "status": "inconclusive"}, 1},
		{"gpuvet_node_verdict_expiry_timestamp_seconds", map[string]string{"node": "n1"}, float64(until.Unix())},
		{"gpuvet_node_quarantine_held", map[string]string{"node": "n2"}, 1},
		{"gpuvet_node_quarantine_held", map[string]string{"node": "n1"}, 0},
		{"gpuvet_node_needs_attention", map[string]string{"node": "n3"}, 1},
		{"gpuvet_circuit_breaker_tripped", nil, 1},
	} {
		if got := gauge(t, fams, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if n := len(fams["gpuvet_node_verdict"].GetMetric()); n != 12 {
		t.Errorf("%d node verdict series, want 4 states × 3 judged nodes (n4 was not run)", n)
	}
	s.Fleet.NodeActions[0].DryRun = true
	b, _ = Prometheus(s)
	if n := len(parseProm(t, b)["gpuvet_node_verdict_expiry_timestamp_seconds"].GetMetric()); n != 2 {
		t.Errorf("a dry run's node has an expiry: %d series", n)
	}
}
