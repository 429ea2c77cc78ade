package health

import (
	"bytes"
	"context"
	"errors"
	"github.com/gpuvet/gpuvet/internal/catalog"
	"math"
	"strings"
	"testing"

	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
	"github.com/gpuvet/gpuvet/internal/term"
)

// simLinks runs the health phase's interconnect part (no microbenchmarks) on n simulated H200s with
// a link fault ("" for none).
func simLinks(t *testing.T, n int, fault string) *results.Health {
	t.Helper()
	f, err := sim.NewFleet(sim.FleetConfig{GPU: "H200", Count: n, StragglerIndex: -1, Seed: 1, LinkFault: fault})
	if err != nil {
		t.Fatal(err)
	}
	return runJudged(context.Background(), f, SimBench{Fleet: f}, Options{Source: "sim", Benchmarks: []string{}, Links: SimLinks{Fleet: f}}, judge.HealthRules{})
}

func checks(fs []results.Flag) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Check+" "+f.Subject)
	}
	return strings.Join(out, "\n")
}

func TestInterconnectHealthyPair(t *testing.T) {
	h := simLinks(t, 2, "")
	if h.Status != results.StatusOK || len(h.Flags) > 0 {
		t.Fatalf("status %s, flags:\n%s", h.Status, checks(h.Flags))
	}
	ic := h.Interconnect
	if ic == nil || len(ic.Pairs) != 1 || ic.Pairs[0].Path != "NV18" || len(ic.Links) != 2 || ic.Links[0].Up() != 18 {
		t.Fatalf("interconnect %+v", ic)
	}
	p := ic.Pairs[0]
	if p.PeakGBps != 450 || p.Uni == nil || math.Abs(*p.Uni.Ratio-0.82) > 0.02 || math.Abs(*p.Bi.Ratio-0.81) > 0.02 {
		t.Errorf("pair %+v uni %+v bi %+v: want peak 450 GB/s, ratios near 0.82 and 0.81", p, p.Uni, p.Bi)
	}
	ar := ic.AllReduce
	if ar == nil || ar.Status != results.StatusOK || len(ar.Sizes) != len(AllReduceSizes) || ar.PeakGBps != 450 {
		t.Fatalf("all-reduce %+v", ar)
	}
	last := ar.Sizes[len(ar.Sizes)-1]
	if r := *last.BusBWRatio; r < 0.6 || r > 0.75 || last.BusBWGBps != last.AlgBWGBps {
		t.Errorf("1 GiB: busbw %v (ratio %v), algbw %v: two ranks give busbw = algbw", last.BusBWGBps, r, last.AlgBWGBps)
	}
	if ar.Sizes[0].BusBWGBps >= last.BusBWGBps {
		t.Error("a 1 MiB all-reduce as fast as 1 GiB: the latency term is missing")
	}
}

func TestInterconnectLinkDownFailsTheGPU(t *testing.T) {
	h := simLinks(t, 4, "1:down")
	if h.GPUs[1].Status != results.StatusFailed || h.Status != results.StatusFailed {
		t.Fatalf("gpu 1 %s, host %s; want failed", h.GPUs[1].Status, h.Status)
	}
	if c := checks(h.GPUs[1].Flags); !strings.Contains(c, CheckNVLinkDown) || strings.Contains(checks(h.GPUs[0].Flags), CheckNVLinkDown) {
		t.Errorf("gpu 1 flags %q; gpu 0 flags %q", c, checks(h.GPUs[0].Flags))
	}
	for _, p := range h.Interconnect.Pairs {
		want := "NV18"
		if p.A == 1 || p.B == 1 {
			want = "NV16"
		}
		if p.Path != want {
			t.Errorf("pair %d–%d on %s, want %s", p.A, p.B, p.Path, want)
		}
	}
}

func TestInterconnectSlowLinkFlagsItsPairs(t *testing.T) {
	h := simLinks(t, 4, "2:slow")
	for _, gh := range h.GPUs {
		if gh.Status != results.StatusOK {
			t.Errorf("gpu %d %s: a slow link is a host flag, not a GPU failure", gh.GPU.Index, gh.Status)
		}
	}
	c := checks(h.Flags)
	for _, want := range []string{CheckP2PBandwidth + " gpu 0 ↔ gpu 2", CheckLinkCompare + " gpu 2 ↔ gpu 3", CheckAllReduce + " host"} {
		if !strings.Contains(c, want) {
			t.Errorf("flags lack %q:\n%s", want, c)
		}
	}
	if strings.Contains(c, "gpu 0 ↔ gpu 1") {
		t.Errorf("a healthy pair flagged:\n%s", c)
	}
	if h.Status != results.StatusFlag {
		t.Errorf("host %s, want flag", h.Status)
	}
}

func TestInterconnectErrorsThatGrowFail(t *testing.T) {
	h := simLinks(t, 2, "0:errors")
	if h.GPUs[0].Status != results.StatusFailed || !strings.Contains(checks(h.GPUs[0].Flags), CheckNVLinkErrors) {
		t.Fatalf("gpu 0 %s flags %q", h.GPUs[0].Status, checks(h.GPUs[0].Flags))
	}
	if !strings.Contains(h.GPUs[0].Flags[0].Reason, "replay +41") {
		t.Errorf("reason %q does not name the counter and its growth", h.GPUs[0].Flags[0].Reason)
	}
	if h.GPUs[1].Status != results.StatusOK {
		t.Errorf("gpu 1 %s", h.GPUs[1].Status)
	}
}

// linkHost is a hand-made result: GPUs of one model and the pairs given, with the catalog's NVLink
// count the health phase records.
func linkHost(name string, n int, pairs ...results.GPUPair) *results.Health {
	h := &results.Health{Source: "nvml", Interconnect: &results.Interconnect{Source: "nvml", Pairs: pairs}}
	if spec, ok := catalog.Builtin().LookupGPU(name); ok {
		h.Interconnect.DatasheetModel, h.Interconnect.DatasheetNVLinks = spec.Key, spec.NVLinks()
	}
	for i := 0; i < n; i++ {
		g := h200(i)
		g.Name = name
		h.GPUs = append(h.GPUs, results.GPUHealth{GPU: g})
	}
	return h
}

func TestInterconnectPCIePathFlagsOnlyNVLinkModels(t *testing.T) {
	h := linkHost("NVIDIA H200", 2, results.GPUPair{A: 0, B: 1, Path: "SYS", P2P: "ok"})
	judge.Health(h, judge.HealthRules{})
	if !strings.Contains(checks(h.Flags), CheckNVLinkPath) || !strings.Contains(h.Flags[0].Reason, "ships with 18 NVLinks") {
		t.Errorf("H200 pair on SYS: flags %q", checks(h.Flags))
	}
	h = linkHost("NVIDIA L40S", 2, results.GPUPair{A: 0, B: 1, Path: "SYS", P2P: "ok"})
	judge.Health(h, judge.HealthRules{})
	if len(h.Flags) > 0 {
		t.Errorf("L40S (no NVLink) on SYS flagged: %q", checks(h.Flags))
	}
}

func TestInterconnectPeerAccessUnavailableIsSaid(t *testing.T) {
	h := linkHost("NVIDIA H200", 3,
		results.GPUPair{A: 0, B: 1, Path: "NV18", NVLinks: 18, P2P: "not supported by the chipset"},
		results.GPUPair{A: 0, B: 2, Path: "NV18", NVLinks: 18, P2P: "ok", Error: "peer access unavailable: cuCtxEnablePeerAccess: CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (217)"},
		results.GPUPair{A: 1, B: 2, Path: "NV18", NVLinks: 18, P2P: "ok"})
	judge.Health(h, judge.HealthRules{})
	c := checks(h.Flags)
	if !strings.Contains(c, CheckP2PAccess+" gpu 0 ↔ gpu 1") || !strings.Contains(c, CheckP2PAccess+" gpu 0 ↔ gpu 2") || strings.Contains(c, "gpu 1 ↔ gpu 2") {
		t.Errorf("flags:\n%s", c)
	}
	judge.Health(h, judge.HealthRules{}) // again on the same result: the same flags, once
	if checks(h.Flags) != c {
		t.Errorf("Evaluate is not repeatable:\n%s\nthen\n%s", c, checks(h.Flags))
	}
}

func TestLinkPeaksFromMeasuredLinkSpeed(t *testing.T) {
	// The 2 × H200 of docs/interconnect-h200x2.md: 18 links at 26.562 GB/s, 394.7 GB/s one way.
	h := linkHost("NVIDIA H200", 2, results.GPUPair{A: 0, B: 1, Path: "NV18", NVLinks: 18, P2P: "ok",
		Uni: &results.PairFigure{GBps: 394.7}, Bi: &results.PairFigure{GBps: 774.7}})
	for g := 0; g < 2; g++ {
		gl := results.GPULinks{GPU: g}
		for l := 0; l < 18; l++ {
			gl.Links = append(gl.Links, results.NVLink{Link: l, Up: true, GBps: 26.562})
		}
		h.Interconnect.Links = append(h.Interconnect.Links, gl)
	}
	h.Interconnect.AllReduce = &results.AllReduce{Status: results.StatusOK, GPUs: 2, Sizes: []results.AllReduceSize{{Bytes: 1 << 30, BusBWGBps: 327.8}}}
	LinkPeaks(h, nil) // the phase's figures: peaks and ratios
	judge.Health(h, judge.HealthRules{})
	p := h.Interconnect.Pairs[0]
	if math.Abs(p.PeakGBps-478.116) > 0.01 || math.Abs(*p.Uni.Ratio-0.8255) > 0.001 || math.Abs(*p.Bi.Ratio-0.8102) > 0.001 {
		t.Errorf("peak %v, uni %v, bi %v", p.PeakGBps, *p.Uni.Ratio, *p.Bi.Ratio)
	}
	if r := *h.Interconnect.AllReduce.Sizes[0].BusBWRatio; math.Abs(r-0.6856) > 0.001 {
		t.Errorf("busbw ratio %v", r)
	}
	if h.Status != results.StatusOK {
		t.Errorf("status %s, flags %q", h.Status, checks(h.Flags))
	}
}

func TestMeasurePairs(t *testing.T) {
	if got := measurePairs(4); len(got) != 6 {
		t.Errorf("4 GPUs: %v, want all 6 pairs", got)
	}
	got := measurePairs(8)
	if len(got) != 8 || got[7] != [2]int{0, 7} || got[0] != [2]int{0, 1} {
		t.Errorf("8 GPUs: %v, want the ring's 8 neighbour pairs", got)
	}
	if measurePairs(1) != nil {
		t.Error("1 GPU: pairs")
	}
}

// linkStub is a LinkRunner whose all-reduce returns what it is given.
type linkStub struct {
	ar  *results.AllReduce
	err error
}

func (s linkStub) PeerCopy(context.Context, results.GPUInfo, results.GPUInfo) (float64, float64, error) {
	return 0, 0, errors.New("peer access unavailable: the driver says GPU 0 cannot map GPU 1's memory")
}
func (s linkStub) AllReduce(context.Context, []results.GPUInfo, []int64) (*results.AllReduce, error) {
	return s.ar, s.err
}
func (s linkStub) Describe() string { return "stub" }

func TestAllReduceSkippedAndFailed(t *testing.T) {
	src := newFake(2)
	skipped := &results.AllReduce{Status: results.StatusSkipped, Note: "skipped: libnccl not found; point --nccl-lib at a libnccl.so.2"}
	h := runJudged(context.Background(), src, nil, Options{Source: "nvml", Benchmarks: []string{}, Links: linkStub{ar: skipped}}, judge.HealthRules{})
	if ar := h.Interconnect.AllReduce; ar.Status != results.StatusSkipped || strings.Contains(checks(h.Flags), CheckAllReduce) {
		t.Errorf("all-reduce %+v, flags %q", ar, checks(h.Flags))
	}
	if !strings.Contains(checks(h.Flags), CheckP2PAccess) || !strings.Contains(h.Interconnect.Pairs[0].Error, "peer access unavailable") {
		t.Errorf("the failed peer copy is not said: %+v, flags %q", h.Interconnect.Pairs[0], checks(h.Flags))
	}
	var buf bytes.Buffer
	term.Health(&buf, h)
	if !strings.Contains(buf.String(), "libnccl not found") {
		t.Errorf("render hides the skip:\n%s", buf.String())
	}
	h = runJudged(context.Background(), src, nil, Options{Source: "nvml", Benchmarks: []string{}, Links: linkStub{err: errors.New("ncclCommInitAll: ncclResult 2 (unhandled system error)")}}, judge.HealthRules{})
	if ar := h.Interconnect.AllReduce; ar.Status != results.StatusFailed || !strings.Contains(ar.Error, "ncclCommInitAll") {
		t.Errorf("all-reduce %+v", ar)
	}
}

func TestInterconnectFromCapturesRenders(t *testing.T) {
	src, err := gpu.FromNvidiaSMIXML("testdata/h200x2.xml", nil)
	if err != nil {
		t.Fatal(err)
	}
	ic, err := gpu.FromLinkCaptures("testdata/h200x2-topo.txt", "testdata/h200x2-nvlink.txt")
	if err != nil {
		t.Fatal(err)
	}
	h := runJudged(context.Background(), gpu.WithLinks(src, ic), nil, Options{Source: "nvidia-smi-xml"}, judge.HealthRules{})
	if h.Interconnect == nil || h.Interconnect.Pairs[0].Path != "NV18" || h.Interconnect.Links[1].Up() != 18 {
		t.Fatalf("interconnect %+v", h.Interconnect)
	}
	if p := h.Interconnect.Pairs[0]; math.Abs(p.PeakGBps-478.116) > 0.01 {
		t.Errorf("peak %v, want 18 × 26.562", p.PeakGBps)
	}
	if strings.Contains(checks(h.Flags), "nvlink") || h.GPUs[0].Status == results.StatusFailed {
		t.Errorf("healthy capture flagged: %q", checks(h.Flags))
	}
	var buf bytes.Buffer
	term.Health(&buf, h)
	for _, want := range []string{"GPU0  X     NV18", "18/18", "26.562 GB/s"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("render lacks %q:\n%s", want, buf.String())
		}
	}
}
