package term

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/fleetview/synth"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// simFleet is a judged synthetic fleet of nodes × 8 GPUs made from a real `gpuvet run --sim
// --sim-gpus 8` summary: node 7 15 % slower, node 13's load Jobs failed, node 21 never ready.
func simFleet(t testing.TB, nodes int) *results.Summary {
	t.Helper()
	src, err := results.Read(filepath.Join("..", "report", "testdata", "sim8-summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	o := synth.Defaults()
	o.Nodes = nodes
	s, err := synth.Fleet(src, o)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := config.Load(config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := judge.Fleet(s, plan); err != nil {
		t.Fatal(err)
	}
	return s
}

// Issue 31: 1,000 nodes × 8 GPUs print a compact fleet block, not 8,000 endpoint rows: the counts,
// the failed, never-ready and slow nodes first with their reasons, the rest counted.
func TestSummaryFleetCompactAtScale(t *testing.T) {
	s := simFleet(t, 1000)
	var b bytes.Buffer
	Summary(&b, s)
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) > 80 {
		t.Fatalf("%d lines for 1,000 nodes, want at most 80:\n%s", len(lines), out)
	}
	if !strings.HasPrefix(out, "Fleet: 1,000 nodes, 7,992 GPUs: 1 failed, 1 skipped, 1 flag, 997 ok\n") {
		t.Errorf("counts line:\n%s", lines[0])
	}
	worst := regexp.MustCompile(`(?m)^(\d+)\s+(gpu-node-\d+)\s+([a-z_]+)\s`).FindAllStringSubmatch(out, -1)
	if len(worst) != fleetWorstMin {
		t.Fatalf("%d worst nodes listed, want %d:\n%s", len(worst), fleetWorstMin, out)
	}
	for i, w := range [][2]string{{synth.NodeName(13), "failed"}, {synth.NodeName(21), "skipped"}, {synth.NodeName(7), "flag"}} {
		if worst[i][2] != w[0] || worst[i][3] != w[1] {
			t.Errorf("rank %d: %s %s, want %s %s", i+1, worst[i][2], worst[i][3], w[0], w[1])
		}
	}
	for _, w := range []string{"BackoffLimitExceeded", "never became Ready", "-14.", "The other 995 nodes: 995 ok, from "} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "HOST  MODEL") {
		t.Error("the per-endpoint table was printed for 1,000 nodes")
	}
}

// 1 to 4 hosts keep the per-endpoint table, one row per GPU, as before.
func TestSummaryFleetSmallUnchanged(t *testing.T) {
	for _, n := range []int{2, 4} {
		s := simFleet(t, n)
		var b bytes.Buffer
		Summary(&b, s)
		out := b.String()
		if !strings.HasPrefix(out, "HOST  ") || strings.Contains(out, "Worst nodes") {
			t.Fatalf("%d hosts: not the per-endpoint table:\n%s", n, out)
		}
		rows := regexp.MustCompile(`(?m)^gpu-node-\d+\s+\S+\s+\d+\s`).FindAllString(out, -1)
		if len(rows) != 8*n {
			t.Errorf("%d hosts: %d endpoint rows, want %d", n, len(rows), 8*n)
		}
	}
	var one bytes.Buffer
	src, err := results.Read(filepath.Join("..", "report", "testdata", "sim8-summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	Summary(&one, src)
	if strings.HasPrefix(one.String(), "HOST") || strings.Contains(one.String(), "Fleet:") || strings.Count(one.String(), "Qwen/Qwen3-8B  ") < 8 {
		t.Errorf("one host:\n%s", one.String())
	}
}
