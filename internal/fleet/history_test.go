package fleet

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/history"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
)

// A fleet run is recorded once by the merge, every host a node of it, and the next fleet run
// compares each node with its acceptance run: node b, 12 % slower as a whole, is flagged against
// it, node a is not.
func TestFleetRunsRecordAndJudgeDrift(t *testing.T) {
	p := testPlan(t)
	run := func(bSlow float64) *results.Summary {
		a := &testHost{name: "a", sum: withGPUs(oneHost(healthy(), healthy()), 2)}
		b := &testHost{name: "b", sum: withGPUs(oneHost(healthy().scaled(bSlow), healthy().scaled(bSlow)), 2)}
		var out, errOut bytes.Buffer
		_ = Execute(context.Background(), p, testBackend{hosts: []Host{a, b}}, ExecOptions{Stdout: &out, Stderr: &errOut})
		s, err := results.Read(p.Config.Output.Dir + "/summary.json")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := run(0)
	if h := first.History; h == nil || h.Error != "" || h.Recorded == nil || h.Recorded.Nodes != 2 {
		t.Fatalf("first fleet run's history: %+v", h)
	}
	// Its hosts are inconclusive (the canned sync rungs have 10 requests): pin it as the acceptance.
	st, err := history.Open(context.Background(), p.Config.History)
	if err != nil {
		t.Fatal(err)
	}
	if pinned, err := st.Pin(context.Background(), first.RunID, "", ""); err != nil || len(pinned) != 2 {
		t.Fatalf("pin: %v %q", err, pinned)
	}
	st.Close()
	second := run(0.12)
	var flagged []string
	for _, h := range second.Hosts {
		for _, f := range h.Flags {
			if f.Check == judge.CheckDrift {
				flagged = append(flagged, h.Name)
				if !strings.Contains(f.Reason, first.RunID) || !strings.Contains(f.Reason, "interval of the gap") {
					t.Errorf("drift reason %q", f.Reason)
				}
			}
		}
	}
	if len(flagged) == 0 || strings.ReplaceAll(strings.Join(flagged, ""), "b", "") != "" {
		t.Fatalf("drift flagged on %v, want node b only; drift rows %+v", flagged, second.History.Drift)
	}
	st, err = history.Open(context.Background(), p.Config.History)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if rs, err := st.Runs(context.Background(), "", 0); err != nil || len(rs) != 2 {
		t.Fatalf("%d runs recorded (%v), want 2: one per fleet run, none per host", len(rs), err)
	}
}
