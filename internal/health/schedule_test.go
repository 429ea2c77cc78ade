package health

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// linkedSource is a fakeSource with a topology: every pair joined by NVLink through NVSwitches, and
// pcie giving the pair's PCIe common ancestor (nil: not known).
type linkedSource struct {
	*fakeSource
	pcie func(a, b int) string
}

func (l linkedSource) Interconnect() (*results.Interconnect, error) {
	ic := &results.Interconnect{Source: "fake"}
	n := len(l.gpus)
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			p := results.GPUPair{A: a, B: b, Path: "NV18", NVLinks: 18, NVSwitch: true, P2P: "ok"}
			if l.pcie != nil {
				p.PCIePath = l.pcie(a, b)
			}
			ic.Pairs = append(ic.Pairs, p)
		}
	}
	return ic, nil
}

// hgx is an 8-GPU board where GPUs 2k and 2k+1 share a PCIe switch.
func hgx(a, b int) string {
	if a/2 == b/2 {
		return "PIX"
	}
	if a/4 == b/4 {
		return "NODE"
	}
	return "SYS"
}

// tracker records which GPUs are busy at once: it sleeps d per benchmark and keeps, per benchmark
// kind, the most GPUs busy together and every pair of GPUs that were busy together.
type tracker struct {
	d        time.Duration
	mu       sync.Mutex
	busy     map[string]map[int]bool
	most     map[string]int
	together map[string]map[[2]int]bool
}

func newTracker(d time.Duration) *tracker {
	return &tracker{d: d, busy: map[string]map[int]bool{}, most: map[string]int{}, together: map[string]map[[2]int]bool{}}
}

func (t *tracker) hold(kind string, gpus ...int) {
	t.mu.Lock()
	if t.busy[kind] == nil {
		t.busy[kind], t.together[kind] = map[int]bool{}, map[[2]int]bool{}
	}
	for _, g := range gpus {
		if t.busy[kind][g] {
			t.together[kind][[2]int{g, g}] = true // one GPU in two measurements at once
		}
		for o := range t.busy[kind] {
			t.together[kind][[2]int{min(o, g), max(o, g)}] = true
		}
		t.busy[kind][g] = true
	}
	t.most[kind] = max(t.most[kind], len(t.busy[kind]))
	t.mu.Unlock()
	time.Sleep(t.d)
	t.mu.Lock()
	for _, g := range gpus {
		delete(t.busy[kind], g)
	}
	t.mu.Unlock()
}

func kind(name string) string {
	if isPCIe(name) {
		return "pcie"
	}
	return "local"
}

func (t *tracker) Microbench(_ context.Context, g results.GPUInfo, name string) (float64, string, error) {
	t.hold(kind(name), g.Index)
	f := h200Figures[name]
	return f.v, f.unit, nil
}

func (t *tracker) Burn(ctx context.Context, g results.GPUInfo) (float64, error) {
	<-ctx.Done()
	return 670, nil
}

func (t *tracker) PeerCopy(_ context.Context, a, b results.GPUInfo) (float64, float64, error) {
	t.hold("peer", a.Index, b.Index)
	return 390, 770, nil
}

func (t *tracker) AllReduce(_ context.Context, gpus []results.GPUInfo, _ []int64) (*results.AllReduce, error) {
	return &results.AllReduce{Status: results.StatusSkipped, Note: "fake"}, nil
}

func (t *tracker) Describe() string { return "tracker" }

func timingOf(h *results.Health) map[string]results.PhaseTime {
	out := map[string]results.PhaseTime{}
	for _, p := range h.Timing {
		out[p.Phase] = p
	}
	return out
}

// At node scale the GPU-local benchmarks run on all 8 GPUs at once, PCIe copies never on two GPUs
// of one switch at once, peer copies never on one GPU twice at once, and the phase takes about
// one GPU's time; without Parallel, everything runs one at a time, as before.
func TestNodeScaleSchedule(t *testing.T) {
	const d = 40 * time.Millisecond
	src := linkedSource{newFake(8), hgx}
	tr := newTracker(d)
	start := time.Now()
	h := Run(context.Background(), src, tr, Options{Source: "nvml", Parallel: true, Links: tr, NoNUMABind: true, DCGM: false})
	took := time.Since(start)
	if tr.most["local"] != 8 {
		t.Errorf("GEMM/HBM: at most %d GPUs at once, want 8", tr.most["local"])
	}
	for p := range tr.together["pcie"] {
		if hgx(p[0], p[1]) == "PIX" {
			t.Errorf("PCIe copies on GPUs %d and %d (one switch) ran at once", p[0], p[1])
		}
	}
	if tr.most["pcie"] != 4 {
		t.Errorf("PCIe: at most %d GPUs at once, want 4 (one per switch)", tr.most["pcie"])
	}
	for p := range tr.together["peer"] {
		if p[0] == p[1] {
			t.Errorf("GPU %d in two peer copies at once", p[0])
		}
	}
	if tr.most["peer"] != 8 {
		t.Errorf("peer copies: at most %d GPUs busy at once, want 8 (4 disjoint pairs)", tr.most["peer"])
	}
	// One GPU's work: 4 local + 2 PCIe benchmarks ×2 waves, 2 rounds of pairs: 10 × d, against
	// 8 × 6 + 8 pairs = 56 × d one at a time. Generous: under 30 × d.
	if took > 30*d {
		t.Errorf("node-scale health took %v, want about one GPU's time (%v)", took, 10*d)
	}
	tm := timingOf(h)
	if !strings.Contains(tm["gemm_hbm"].Schedule, "8 GPUs at once") || !strings.Contains(tm["pcie"].Schedule, "2 waves") ||
		!strings.Contains(tm["peer_copy"].Schedule, "2 rounds") {
		t.Errorf("schedules not said: %+v", h.Timing)
	}
	for _, gh := range h.GPUs {
		var names []string
		for _, b := range gh.Bench {
			names = append(names, b.Name)
		}
		if strings.Join(names, ",") != strings.Join(results.MicrobenchNames(), ",") {
			t.Errorf("gpu %d benchmarks %v, want the usual order", gh.GPU.Index, names)
		}
	}
	for _, p := range h.Interconnect.Pairs {
		if p.A+1 == p.B || p.A == 0 && p.B == 7 {
			if p.Uni == nil || p.Uni.GBps != 390 {
				t.Errorf("pair %d–%d not measured: %+v", p.A, p.B, p)
			}
		}
	}

	serial := newTracker(d / 4)
	h = Run(context.Background(), linkedSource{newFake(4), hgx}, serial, Options{Source: "nvml", Links: serial, NoNUMABind: true})
	for k, n := range serial.most {
		if k != "peer" && n != 1 || k == "peer" && n != 2 {
			t.Errorf("serial: %s ran on %d GPUs at once", k, n)
		}
	}
	if s := timingOf(h)["benchmarks"].Schedule; s != "one GPU at a time" {
		t.Errorf("serial schedule %q", s)
	}
}

// Without a PCIe topology the PCIe copies run one GPU at a time and the timing says why; GPUs on
// separate root ports run together.
func TestPCIeWaves(t *testing.T) {
	mk := func(n int, pcie func(a, b int) string) *results.Health {
		h := &results.Health{}
		for i := 0; i < n; i++ {
			h.GPUs = append(h.GPUs, results.GPUHealth{GPU: h200(i)})
		}
		src := linkedSource{newFake(n), pcie}
		h.Interconnect, _ = src.Interconnect()
		return h
	}
	cases := []struct {
		h     *results.Health
		waves int
		note  string
	}{
		{mk(8, hgx), 2, "2 waves"},
		{mk(8, nil), 8, "not known"},
		{mk(4, func(a, b int) string { return "SYS" }), 1, "4 GPUs at once"},
		{mk(4, func(a, b int) string { return "PXB" }), 4, "share PCIe switches"},
		{mk(1, nil), 1, "1 GPU"},
		{&results.Health{GPUs: []results.GPUHealth{{GPU: h200(0)}, {GPU: h200(1)}}}, 2, "not known"},
	}
	for i, c := range cases {
		w, note := pcieWaves(c.h)
		if len(w) != c.waves || !strings.Contains(note, c.note) {
			t.Errorf("case %d: %d waves (%q), want %d (%q)", i, len(w), note, c.waves, c.note)
		}
	}
}

// Pairs over PCIe are measured alone; NVLink pairs with no GPU in common together.
func TestPairRounds(t *testing.T) {
	ic := &results.Interconnect{}
	for a := 0; a < 8; a++ {
		for b := a + 1; b < 8; b++ {
			p := results.GPUPair{A: a, B: b, Path: "NV18", NVLinks: 18}
			if a == 6 && b == 7 {
				p.Path, p.NVLinks = "SYS", 0
			}
			ic.Pairs = append(ic.Pairs, p)
		}
	}
	rounds, note := pairRounds(measurePairs(8), ic)
	seen := 0
	for _, r := range rounds {
		used := map[int]bool{}
		for _, ab := range r {
			seen++
			if used[ab[0]] || used[ab[1]] {
				t.Errorf("round %v uses a GPU twice", r)
			}
			used[ab[0]], used[ab[1]] = true, true
			if ab == [2]int{6, 7} && len(r) != 1 {
				t.Errorf("the PCIe pair 6–7 shares its round: %v", r)
			}
		}
	}
	if seen != 8 || len(rounds) != 3 || !strings.Contains(note, "over PCIe alone") {
		t.Errorf("%d pairs in %d rounds (%q): %v", seen, len(rounds), note, fmt.Sprint(rounds))
	}
	if r, note := pairRounds(measurePairs(3), nil); len(r) != 3 || !strings.Contains(note, "one pair at a time") {
		t.Errorf("no topology: %v %q", r, note)
	}
}

// With sim.bench_time the simulated health phase takes real time, so node scale shows on the
// simulator: 4 virtual H200s at once take well under half the time of one after another.
func TestSimPacedHealthAtNodeScale(t *testing.T) {
	f, err := sim.NewFleet(sim.FleetConfig{GPU: "H200", Count: 4, StragglerIndex: -1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	const pace = 50 * time.Millisecond
	run := func(parallel bool) (time.Duration, *results.Health) {
		start := time.Now()
		h := Run(context.Background(), f, SimBench{Fleet: f, Pace: pace}, Options{Source: "sim", Parallel: parallel, Links: SimLinks{Fleet: f, Pace: pace}})
		return time.Since(start), h
	}
	serial, hs := run(false)
	node, hn := run(true)
	// One at a time: 4 × 6 benchmarks + 6 pairs + the all-reduce = 31 paces; at once: 4 + 2 + 3 rounds + 1 = 10.
	if serial < 31*pace || node*2 > serial {
		t.Errorf("health one at a time %v, at node scale %v: want at least %v and under half", serial, node, 31*pace)
	}
	if hs.Status != hn.Status || len(hn.GPUs[3].Bench) != 6 || hn.Interconnect == nil || len(hn.Interconnect.Pairs) != 6 {
		t.Errorf("node scale measured less: %s vs %s, %+v", hn.Status, hs.Status, hn.GPUs[3].Bench)
	}
	if s := timingOf(hn)["pcie"].Schedule; !strings.Contains(s, "4 GPUs at once") {
		t.Errorf("virtual GPUs share no PCIe switch: %q", s)
	}
}
