package term

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

func renderHosts(fleet bool, names ...string) string {
	s := &results.Summary{}
	if fleet {
		s.Fleet = &results.Fleet{}
	}
	v := []results.Verdict{{Rule: "sync TTFT p95 ≤ 200 ms", Result: "inconclusive", Reason: "inconclusive, too few"}}
	for _, n := range names {
		s.Hosts = append(s.Hosts, results.Host{Name: n, Models: []results.Model{{Model: "Qwen/Qwen3-8B", Endpoints: []results.Endpoint{
			{GPUs: []int{0}, Status: results.StatusOK, Verdicts: v}, {GPUs: []int{1}, Status: results.StatusOK, Verdicts: v}}}}})
	}
	var b bytes.Buffer
	Summary(&b, s)
	return b.String()
}

// Issue 30: a fleet's table has a HOST column (GPU 0 is on every host) and its caveats name the
// host of each GPU; a one-host run's output is as before.
func TestRenderNamesHostsInFleets(t *testing.T) {
	out := renderHosts(true, "node1", "node2")
	if !strings.HasPrefix(out, "HOST") || !strings.Contains(out, "node2  Qwen/Qwen3-8B  1") {
		t.Fatalf("fleet table:\n%s", out)
	}
	if !strings.Contains(out, "node1 gpu 0, node1 gpu 1, node2 gpu 0, node2 gpu 1: sync TTFT p95") {
		t.Fatalf("fleet caveats:\n%s", out)
	}
	out = renderHosts(false, "localhost")
	if strings.Contains(out, "HOST") || !strings.Contains(out, "gpu 0, 1: sync TTFT p95") {
		t.Fatalf("one host:\n%s", out)
	}
}
