package k8s_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// The plan's health section reaches each node's health Job (issue 44): before, the Job ran
// `gpuvet health` with only --expect-gpus and kubernetes.health_args, and a reference_floors entry
// never reached a node. A gemm_bf16 floor the simulated H200 cannot meet (1.4 of its datasheet
// peak) flags every GPU of every node on that floor; the same run without it is ok.
func TestKubernetesHealthJudgesWithThePlansFloors(t *testing.T) {
	e := setup(t)
	e.standIn(t, nil)
	for _, c := range []struct {
		name  string
		extra []string
		want  results.Status
	}{
		{"no floor", nil, results.StatusOK},
		{"reference_floors H200 gemm_bf16 1.4", []string{"--set", "reference_floors.H200.gemm_bf16=1.4"}, results.StatusFlag},
	} {
		out, state := t.TempDir(), t.TempDir()
		// One engine per node: this is about the health phase.
		log, code := e.gpuvet(t, state, e.runArgs(out, append(append([]string{"--gpu-count", "1"}, syncLoad...), c.extra...)...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d (flags without --fail-on-flag exit 0):\n%s", c.name, code, log)
		}
		s, err := results.Read(filepath.Join(out, "summary.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Hosts) != 2 {
			t.Fatalf("%s: %d hosts\n%s", c.name, len(s.Hosts), log)
		}
		for _, h := range s.Hosts {
			if h.Health == nil || len(h.Health.GPUs) != 8 {
				t.Fatalf("%s: node %s: no health of its 8 GPUs\n%s", c.name, h.Name, log)
			}
			floors := 0
			for _, g := range h.Health.GPUs {
				for _, f := range g.Flags {
					if f.Check == "health.datasheet_floor" && strings.Contains(f.Reason, "gemm_bf16") && strings.Contains(f.Reason, "under its 1.40 floor") {
						floors++
					}
				}
			}
			if h.Health.Status != c.want || (floors == 8) != (c.want == results.StatusFlag) || results.Worse(h.Status, c.want) != h.Status {
				t.Errorf("%s: node %s: health %s (want %s), %d GPUs under the plan's gemm_bf16 floor, node %s", c.name, h.Name, h.Health.Status, c.want, floors, h.Status)
			}
		}
		e.assertNothingLeft(t, state)
	}
}
