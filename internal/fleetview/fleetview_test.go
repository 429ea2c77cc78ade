package fleetview

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/results"
)

// host is a node serving model "m" on len(peaks) GPUs, each with that peak output tok/s.
func host(name string, st results.Status, peaks ...float64) results.Host {
	h := results.Host{Name: name, Status: st}
	m := results.Model{Model: "m", Status: st}
	for i, p := range peaks {
		e := results.Endpoint{GPUs: []int{i}, Status: results.StatusOK}
		if p > 0 {
			e.Load = &results.Load{PeakOutputTokS: p, Runs: []results.Run{{Kind: "synchronous", ITL: results.Dist{Count: 30, P95: 6}}}}
		}
		m.Endpoints = append(m.Endpoints, e)
	}
	h.Models = []results.Model{m}
	return h
}

// The ranking: failed, not vetted, flagged, inconclusive, then the furthest below the fleet
// median; each node with its reasons, each GPU against the median.
func TestBuildRanksWorstFirst(t *testing.T) {
	failed := host("n-failed", results.StatusFailed, 0, 0)
	failed.Error = "load job failed\nmore lines"
	flagged := host("n-flag", results.StatusFlag, 850, 850)
	flagged.Flags = []results.Flag{{Scope: "host", Subject: "node n-flag", Check: "compare.node_to_node", Reason: "peak output tok/s 15 % below the median of the others"}}
	inc := host("n-inc", results.StatusInconclusive, 1000, 1000)
	inc.Models[0].Endpoints[1].Verdicts = []results.Verdict{{Rule: "sync TTFT p95 ≤ 200 ms", Result: "inconclusive"}}
	s := &results.Summary{Hosts: []results.Host{
		host("n-ok-fast", results.StatusOK, 1010, 1010),
		host("n-ok-slow", results.StatusOK, 960, 980),
		inc, flagged, failed,
		host("n-ok-mid", results.StatusOK, 1000, 1000),
	}, Fleet: &results.Fleet{Skipped: []results.SkippedHost{{Name: "n-never", Reason: "never became Ready"}}}}
	v := Build(s, "m")
	var got []string
	for _, n := range v.Nodes {
		got = append(got, n.Name)
	}
	want := []string{"n-failed", "n-never", "n-flag", "n-inc", "n-ok-slow", "n-ok-mid", "n-ok-fast"}
	if !slices.Equal(got, want) {
		t.Fatalf("ranked %v, want %v", got, want)
	}
	if v.Median != 1000 || v.GPUs != 12 {
		t.Errorf("median %v, %d GPUs: want 1000, 12", v.Median, v.GPUs)
	}
	if r := v.Nodes[0].Reasons; len(r) == 0 || r[0] != "load job failed" {
		t.Errorf("failed node's reasons %q: want its error's first line first", r)
	}
	if r := v.Nodes[1].Reasons; len(r) != 1 || !strings.Contains(r[0], "never became Ready") {
		t.Errorf("skipped node's reasons %q", r)
	}
	if r := v.Nodes[2].Reasons; len(r) == 0 || !strings.Contains(r[0], "15 % below") {
		t.Errorf("flagged node's reasons %q", r)
	}
	if r := v.Nodes[3].Reasons; len(r) == 0 || !strings.Contains(r[0], "gpu 1: sync TTFT p95 ≤ 200 ms: inconclusive") {
		t.Errorf("inconclusive node's reasons %q", r)
	}
	flag := v.Nodes[2]
	if flag.Value != 850 || flag.DeltaPct > -14.9 || flag.DeltaPct < -15.1 || flag.GPUs[0].DeltaPct > -14.9 {
		t.Errorf("straggler %v at %.2f %% (gpu 0 %.2f %%): want 850 at -15 %%", flag.Value, flag.DeltaPct, flag.GPUs[0].DeltaPct)
	}
	if g := v.Nodes[4].GPUs[0]; g.Label != "gpu 0" || g.ITLP95 != 6 || g.Status != results.StatusOK {
		t.Errorf("a GPU cell: %+v", g)
	}
	var counts []string
	for _, c := range v.Counts() {
		counts = append(counts, string(c.Status)+":"+strings.Repeat("|", c.N))
	}
	if strings.Join(counts, " ") != "failed:| skipped:| flag:| inconclusive:| ok:|||" {
		t.Errorf("counts %v", counts)
	}
	if lo, hi := Spread(v.Nodes[4:]); lo > -2.9 || lo < -3.1 || hi < 0.9 || hi > 1.1 {
		t.Errorf("spread of the ok nodes %.2f … %.2f, want -3 … +1", lo, hi)
	}
}

// A node that served nothing of the model shows its health GPUs; a fleet with no model ranks by status.
func TestBuildWithoutModel(t *testing.T) {
	h := results.Host{Name: "a", Status: results.StatusFlag, Health: &results.Health{GPUs: []results.GPUHealth{
		{GPU: results.GPUInfo{Index: 0}, Status: results.StatusOK},
		{GPU: results.GPUInfo{Index: 1}, Status: results.StatusFlag, Flags: []results.Flag{{Reason: "PCIe x8, want x16"}}}}}}
	s := &results.Summary{Hosts: []results.Host{{Name: "b", Status: results.StatusOK}, h}}
	v := Build(s, "")
	if v.Nodes[0].Name != "a" || len(v.Nodes[0].GPUs) != 2 || v.Nodes[0].GPUs[1].Reason != "PCIe x8, want x16" || v.Median != 0 {
		t.Fatalf("%+v", v.Nodes)
	}
	if r := v.Nodes[0].Reasons; len(r) != 1 || r[0] != "gpu 1: PCIe x8, want x16" {
		t.Errorf("reasons %q", r)
	}
}

// A wall time reads the same in the terminal and the report, rounded (the terminal once truncated
// 75.7 s to 1m15s where the report said 1m16s).
func TestSeconds(t *testing.T) {
	for s, want := range map[float64]string{0.44: "0.4 s", 12.4: "12 s", 75.7: "1m16s", 298.2: "4m58s", 3600: "1h0m0s",
		9.96: "10 s", 59.7: "1m0s", 59.4: "59 s"} { // a value that rounds up to the next unit is written in it
		if got := Seconds(s); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", s, got, want)
		}
	}
}

// A GPU cell of a host that served no endpoint of the model (a health-only fleet) shows the GPU's
// judged verdict, as Prometheus, JUnit and the per-host tables do: the health phase's own status
// of a GPU also counts findings of other layers (another process on it) that leave the GPU ok.
func TestHealthCellsShowTheJudgedVerdict(t *testing.T) {
	h := results.Host{Name: "n", Status: results.StatusInconclusive,
		Health: &results.Health{GPUs: []results.GPUHealth{{GPU: results.GPUInfo{Index: 0}, Status: results.StatusFlag}, {GPU: results.GPUInfo{Index: 1}, Status: results.StatusOK}}},
		GPUs:   []results.GPUVerdict{{Index: 0, Status: results.StatusInconclusive, Health: results.StatusInconclusive}, {Index: 1, Status: results.StatusOK}}}
	v := Build(&results.Summary{Hosts: []results.Host{h}}, "")
	var got []results.Status
	for _, g := range v.Nodes[0].GPUs {
		got = append(got, g.Status)
	}
	if want := []results.Status{results.StatusInconclusive, results.StatusOK}; !slices.Equal(got, want) {
		t.Errorf("cells %v, want the judged verdicts %v", got, want)
	}
}
