package judge

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// acceptanceOf turns a judged summary into the acceptance the history store would read back for
// its node and each of its GPUs.
func acceptanceOf(s *results.Summary, at time.Time) []results.Acceptance {
	h := &s.Hosts[0]
	figs := KeyFigures(h)
	out := []results.Acceptance{{Scope: "node", Host: h.Name, RunID: "accept-run", At: at, Figures: figs}}
	for _, g := range h.Discovery.GPUs {
		out = append(out, results.Acceptance{Scope: "gpu", Host: h.Name, UUID: g.UUID, RunID: "accept-run", At: at, Figures: figs})
	}
	return out
}

func driftFlags(s *results.Summary) (node, gpu int) {
	for _, f := range s.Flags {
		if f.Check != CheckDrift {
			continue
		}
		if f.Scope == "host" {
			node++
		} else {
			gpu++
		}
	}
	return node, gpu
}

// A node 12 % slower as a whole: GPU-to-GPU sees nothing, the acceptance comparison flags the
// node and each GPU, with the figure, its interval and the acceptance run; judging again gives the
// same verdict (Apply runs more than once: baseline, fleet); a node within the margin is not
// flagged; a summary without history is judged as before.
func TestDriftAgainstAcceptance(t *testing.T) {
	at := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	ref := summary(healthy(), healthy())
	Apply(ref, DefaultConfig())
	acc := acceptanceOf(ref, at)

	slow := summary(healthy().scaled(0.12), healthy().scaled(0.12))
	slow.History = &results.History{Acceptance: acc}
	Apply(slow, DefaultConfig())
	for _, f := range slow.Flags {
		if f.Check == CheckGPUToGPU {
			t.Errorf("GPU-to-GPU flagged a node slowed as a whole: %s", f.Reason)
		}
	}
	node, gpu := driftFlags(slow)
	if node == 0 || gpu == 0 || slow.Status != results.StatusFlag {
		t.Fatalf("drift flags: node %d, gpu %d, status %s; rows %+v", node, gpu, slow.Status, slow.History.Drift)
	}
	var found bool
	for _, d := range slow.History.Drift {
		if d.Scope == "node" && d.Metric == MetricTPOTP50 {
			found = true
			if d.Result != "flag" || d.DeltaCI == nil || !(d.DeltaCI.Lo > 6) || d.AcceptanceRun != "accept-run" ||
				!strings.Contains(d.Reason, "2026-11-01") || !strings.Contains(d.Reason, "interval of the gap") {
				t.Errorf("node tpot_p50 drift: %+v", d)
			}
		}
		if d.Metric == MetricTTFTP95 || d.Metric == MetricITLP95 {
			t.Errorf("a tail percentile was judged: %+v", d)
		}
	}
	if !found {
		t.Fatalf("no node drift row for %s: %+v", MetricTPOTP50, slow.History.Drift)
	}
	rows := len(slow.History.Drift)
	Apply(slow, DefaultConfig())
	if n2, g2 := driftFlags(slow); n2 != node || g2 != gpu || len(slow.History.Drift) != rows {
		t.Errorf("judging again: flags %d/%d → %d/%d, rows %d → %d", node, gpu, n2, g2, rows, len(slow.History.Drift))
	}

	near := summary(healthy().scaled(0.03), healthy().scaled(0.03))
	near.History = &results.History{Acceptance: acc}
	Apply(near, DefaultConfig())
	if n, g := driftFlags(near); n+g != 0 {
		t.Errorf("3 %% slower flagged %d node, %d GPU drift(s): %+v", n, g, near.History.Drift)
	}

	plain := summary(healthy().scaled(0.12), healthy().scaled(0.12))
	Apply(plain, DefaultConfig())
	if n, g := driftFlags(plain); n+g != 0 || plain.History != nil {
		t.Errorf("no history, yet drift flags %d/%d", n, g)
	}
}

// Issue 55: a figure whose blocks spread past the drift margin within its own run is reported, not
// gated, against the acceptance run; the same run's figures that repeated still decide.
func TestDriftOfAFigureThatDidNotRepeatIsReported(t *testing.T) {
	at := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	ref := summary(healthy(), healthy())
	Apply(ref, DefaultConfig())
	acc := acceptanceOf(ref, at)
	for _, spread := range []float64{2, 20} {
		slow := summary(healthy().scaled(0.12), healthy().scaled(0.12))
		for ei := range slow.Hosts[0].Models[0].Endpoints {
			r := FindRun(slow.Hosts[0].Models[0].Endpoints[ei].Load, RunSynchronous)
			r.Repeat = &results.Repeat{Blocks: 3, Figures: []results.FigureRepeat{{Figure: MetricTPOTP50, Blocks: []float64{1, 1.1, 1.2}, SpreadPct: spread}}}
		}
		slow.History = &results.History{Acceptance: acc}
		Apply(slow, DefaultConfig())
		var tpot, other int
		for _, d := range slow.History.Drift {
			switch {
			case d.Metric == MetricTPOTP50 && d.Result == string(results.StatusFlag):
				tpot++
			case d.Metric == MetricTPOTP50 && spread > 6 && !strings.Contains(d.Reason, "reported, not gated") && d.Result == string(results.StatusInconclusive):
				t.Errorf("spread %g: %s", spread, d.Reason)
			case d.Metric != MetricTPOTP50 && d.Result == string(results.StatusFlag):
				other++
			}
		}
		if spread < 6 && tpot == 0 {
			t.Errorf("spread %g %%, within the margin: the median TPOT 12 %% slower was not flagged: %+v", spread, slow.History.Drift)
		}
		if spread > 6 && tpot != 0 {
			t.Errorf("spread %g %%, past the margin: the median TPOT was gated (%d flags)", spread, tpot)
		}
		if other == 0 || slow.Status != results.StatusFlag {
			t.Errorf("spread %g %%: the figures that repeated no longer decide (status %s)", spread, slow.Status)
		}
	}
}

// A drift past the margin is weighed against the node's own earlier runs from three on: it stands
// past their spread, is undecided within it, and a figure that moves past the margin from run to
// run is reported, not gated.
func TestDriftAgainstTheNodesOwnRuns(t *testing.T) {
	flag := results.Drift{Result: string(results.StatusFlag), DeltaPct: 10, Reason: "10 % slower"}
	for _, c := range []struct {
		name   string
		series []float64
		want   string
		says   string
	}{
		{"two runs", []float64{100, 101}, "flag", "10 % slower"},
		{"steady", []float64{100, 100.5, 99.5, 100}, "flag", "run-to-run spread too"},
		{"moving", []float64{100, 102, 98, 100, 102, 98, 100, 102, 98, 100}, "inconclusive", "within the 6 % margin"},
		{"not repeating", []float64{100, 115, 85}, "inconclusive", "reported, not gated"},
	} {
		d := againstOwnRuns(flag, c.series, 6)
		if d.Result != c.want || !strings.Contains(d.Reason, c.says) {
			t.Errorf("%s: %s %q, want %s saying %q", c.name, d.Result, d.Reason, c.want, c.says)
		}
		if len(c.series) >= 3 && (d.OwnRuns != len(c.series) || !(d.OwnSpreadPct >= 0)) {
			t.Errorf("%s: own runs %d spread %v", c.name, d.OwnRuns, d.OwnSpreadPct)
		}
	}
	if d := againstOwnRuns(results.Drift{Result: "pass"}, []float64{100, 115, 85}, 6); d.Result != "pass" {
		t.Errorf("a pass became %s", d.Result)
	}
}
