package health

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sysfs"
	"github.com/gpuvet/gpuvet/internal/term"
)

// fakeSource is a host of H200s with settable inventory and per-sample clock reasons.
type fakeSource struct {
	gpus    []results.GPUInfo
	reasons uint64
	mu      sync.Mutex
	n       int
}

func h200(i int) results.GPUInfo {
	zero := int64(0)
	limit := 700.0
	return results.GPUInfo{Index: i, Name: "NVIDIA H200", UUID: fmt.Sprintf("GPU-%d", i), PCIBusID: fmt.Sprintf("00000000:%02X:00.0", i+1),
		NUMANode: -1, MemoryTotalMiB: 143771, PowerLimitW: &limit,
		PCIe: results.PCIeLink{GenCurrent: 5, GenMax: 5, WidthCurrent: 16, WidthMax: 16},
		ECC:  results.ECC{VolatileUncorrected: &zero, AggregateUncorrected: &zero}, ClockEvents: gpu.ClockEvents(gpu.ReasonGPUIdle)}
}

func newFake(n int) *fakeSource {
	f := &fakeSource{}
	for i := 0; i < n; i++ {
		f.gpus = append(f.gpus, h200(i))
	}
	return f
}

func (f *fakeSource) GPUs() ([]results.GPUInfo, error) { return f.gpus, nil }
func (f *fakeSource) Close() error                     { return nil }
func (f *fakeSource) Sample(i int) (results.PowerSample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return results.PowerSample{PowerW: 650 + float64(f.n%3)*10, SMClockMHz: 1980 - f.n, TempC: 50 + f.n%5, ClockReasons: f.reasons, UtilPct: 100}, nil
}

// fakeBench returns H200-like figures; slow[i] scales GPU i; fail names a benchmark that errors.
type fakeBench struct {
	slow map[int]float64
	fail string
	pcie float64 // when set, both PCIe copies measure this many GB/s
}

var h200Figures = map[string]struct {
	v    float64
	unit string
}{
	"sgemm_fp32": {54, "TFLOP/s"}, "gemm_tf32": {455, "TFLOP/s"}, "gemm_bf16": {780, "TFLOP/s"},
	"pcie_h2d": {55, "GB/s"}, "pcie_d2h": {55, "GB/s"}, "hbm_d2d": {4100, "GB/s"},
}

func (b fakeBench) Microbench(_ context.Context, g results.GPUInfo, name string) (float64, string, error) {
	if name == b.fail {
		return 0, "", errors.New("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2)")
	}
	f := h200Figures[name]
	if b.pcie > 0 && strings.HasPrefix(name, "pcie_") {
		f.v = b.pcie
	}
	s := 1.0
	if x, ok := b.slow[g.Index]; ok {
		s = x
	}
	return f.v * s, f.unit, nil
}

func (b fakeBench) Burn(ctx context.Context, g results.GPUInfo) (float64, error) {
	<-ctx.Done()
	return 670, nil
}

func flagsOf(h *results.Health) []string {
	var out []string
	for _, f := range h.Flags {
		out = append(out, f.Check)
	}
	for _, gh := range h.GPUs {
		for _, f := range gh.Flags {
			out = append(out, fmt.Sprintf("%s@%d", f.Check, gh.GPU.Index))
		}
	}
	return out
}

func TestRunHealthy(t *testing.T) {
	h := runJudged(context.Background(), newFake(2), fakeBench{}, Options{Source: "nvml", ExpectGPUs: 2, DCGMBinary: "no-dcgmi-" + t.Name(), DCGM: true}, judge.HealthRules{})
	if h.Status != results.StatusOK || len(flagsOf(h)) != 0 {
		t.Fatalf("status %s flags %v", h.Status, flagsOf(h))
	}
	b := h.GPUs[0].Bench
	if len(b) != len(results.MicrobenchNames()) {
		t.Fatalf("%d benchmarks", len(b))
	}
	for _, m := range b {
		if m.Peak == nil || m.Ratio == nil || *m.Ratio <= 0 || *m.Ratio > 1 {
			t.Errorf("%s: peak %v ratio %v", m.Name, m.Peak, m.Ratio)
		}
	}
	if r := *b[0].Ratio; r < 0.80 || r > 0.81 { // 54 / 67
		t.Errorf("sgemm ratio %.3f, want 54/67", r)
	}
	if r := *b[3].Ratio; r < 0.86 || r > 0.88 { // 55 / (3.938 × 16)
		t.Errorf("pcie ratio %.3f, want 55/63", r)
	}
	if h.DCGM.Status != results.StatusSkipped || h.DCGM.Note != "skipped: dcgmi not installed" {
		t.Errorf("dcgm %+v", h.DCGM)
	}
	if len(h.Comparisons) != 6 {
		t.Errorf("%d comparisons, want 6 (3 GEMM + 2 PCIe + HBM)", len(h.Comparisons))
	}
	if !strings.Contains(h.GPUs[0].Binding, "unknown") {
		t.Errorf("binding %q, want it to say why none", h.GPUs[0].Binding)
	}
}

func TestRunFlags(t *testing.T) {
	one := int64(1)
	yes := true
	cases := []struct {
		name  string
		mod   func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules)
		want  []string
		state results.Status
	}{
		{"count", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) { o.ExpectGPUs = 4 }, []string{CheckCount}, results.StatusFlag},
		{"ecc", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) {
			f.gpus[1].ECC.VolatileUncorrected = &one
		}, []string{CheckECC + "@1"}, results.StatusFlag},
		{"retired", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) {
			f.gpus[0].RetiredPagesPending = &yes
		}, []string{CheckRetired + "@0"}, results.StatusFlag},
		{"remap fail", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) {
			f.gpus[0].RemappedRows = &results.RemappedRows{Failure: true}
		}, []string{CheckRemap + "@0"}, results.StatusFailed}, // no spare rows left: the GPU is failed (drain-rma)
		{"remap pending", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) {
			f.gpus[1].RemappedRows = &results.RemappedRows{Pending: true}
		}, []string{CheckRemap + "@1"}, results.StatusFlag},
		{"pcie x8", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) { f.gpus[1].PCIe.WidthCurrent = 8 }, []string{CheckPCIeWidth + "@1"}, results.StatusFlag},
		{"pcie x8 by design", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) {
			f.gpus[0].PCIe.WidthCurrent, f.gpus[1].PCIe.WidthCurrent, r.ExpectPCIeWidth = 8, 8, 8
		}, nil, results.StatusOK},
		{"pcie x4 under expected x8", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) {
			f.gpus[0].PCIe.WidthCurrent, f.gpus[1].PCIe.WidthCurrent, r.ExpectPCIeWidth = 8, 4, 8
		}, []string{CheckPCIeWidth + "@1"}, results.StatusFlag},
		{"slow pcie, gemm and hbm spread", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) { b.slow = map[int]float64{1: 0.1} },
			[]string{CheckPCIeBW + "@1", CheckPCIeBW + "@1", CheckFloor + "@1", CheckFloor + "@1", CheckFloor + "@1", CheckFloor + "@1", CheckCompare + "@1", CheckCompare + "@1", CheckCompare + "@1", CheckCompare + "@1", CheckCompare + "@1", CheckCompare + "@1"}, results.StatusFlag},
		{"spread within 25 %", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) { b.slow = map[int]float64{1: 0.8} }, nil, results.StatusOK},
		{"hw slowdown at idle", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) {
			f.gpus[0].ClockEvents = gpu.ClockEvents(0x9)
		}, []string{CheckClockEvents + "@0"}, results.StatusFlag},
		{"sw power cap at idle is a note", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) {
			f.gpus[0].ClockEvents = gpu.ClockEvents(0x4)
		}, nil, results.StatusOK},
		{"power cap under burn is fine", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) { f.reasons = gpu.ReasonSWPowerCap }, nil, results.StatusOK},
		{"thermal under burn", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) {
			f.reasons = gpu.ReasonSWPowerCap | gpu.ReasonSWThermalSlowdown
		},
			[]string{CheckBurnClock + "@0", CheckBurnClock + "@1"}, results.StatusFlag},
		{"power brake under burn: the host's", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) {
			f.reasons = gpu.ReasonHWPowerBrakeSlowdown | gpu.ReasonHWSlowdown
		},
			[]string{judge.CheckPowerBrake + "@0", judge.CheckPowerBrake + "@1"}, results.StatusFlag},
		{"xid", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) {
			f.gpus[1].XIDs = []results.XIDEvent{{XID: 79, Note: gpu.XIDNote(79)}}
		}, []string{CheckXID + "@1"}, results.StatusFlag},
		{"benchmark fails", func(f *fakeSource, o *Options, b *fakeBench, r *judge.HealthRules) { b.fail = "hbm_d2d" }, nil, results.StatusFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, b := newFake(2), fakeBench{}
			o := Options{Source: "nvml", Burn: 60 * time.Millisecond, SampleEvery: 10 * time.Millisecond}
			var r judge.HealthRules
			c.mod(f, &o, &b, &r)
			h := runJudged(context.Background(), f, b, o, r)
			got := flagsOf(h)
			if fmt.Sprint(got) != fmt.Sprint(c.want) || h.Status != c.state {
				t.Errorf("flags %v status %s; want %v %s", got, h.Status, c.want, c.state)
			}
			for _, gh := range h.GPUs {
				for _, fl := range gh.Flags {
					if fl.Reason == "" || strings.Contains(fl.Reason, "\n") {
						t.Errorf("flag %s: reason must be one non-empty line: %q", fl.Check, fl.Reason)
					}
				}
			}
		})
	}
}

func TestBurnSummary(t *testing.T) {
	f := newFake(1)
	f.reasons = gpu.ReasonSWPowerCap
	h := runJudged(context.Background(), f, fakeBench{}, Options{Source: "nvml", SkipBench: true, Burn: 100 * time.Millisecond, SampleEvery: 10 * time.Millisecond}, judge.HealthRules{})
	b := h.GPUs[0].Burn
	if b == nil || len(b.Samples) < 3 {
		t.Fatalf("burn %+v", b)
	}
	if b.TFLOPS != 670 || b.PowerMeanW < 650 || b.PowerMaxW < b.PowerMeanW || b.PowerLimitW != 700 || b.MinSMClockMHz >= 1980 || b.MaxTempC < 50 {
		t.Errorf("summary %+v", b)
	}
	if fmt.Sprint(b.ReasonsSeen) != "[sw_power_cap]" {
		t.Errorf("reasons %v", b.ReasonsSeen)
	}
	if !strings.Contains(strings.Join(h.GPUs[0].Notes, ";"), "sw_power_cap under the burn") {
		t.Errorf("notes %v", h.GPUs[0].Notes)
	}
}

func TestXMLSourceRunsInventoryOnly(t *testing.T) {
	src, err := gpu.FromNvidiaSMIXML("../gpu/testdata/h200x2.xml", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := runJudged(context.Background(), src, nil, Options{Source: "nvidia-smi-xml", Burn: time.Second, DCGM: true}, judge.HealthRules{})
	if len(h.GPUs) != 2 || h.Status != results.StatusOK || h.DCGM.Status != results.StatusSkipped {
		t.Fatalf("status %s flags %v dcgm %+v", h.Status, flagsOf(h), h.DCGM)
	}
	var out bytes.Buffer
	term.Health(&out, h)
	for _, want := range []string{"Inventory", "NVIDIA H200", "gen5 x16 / gen5 x16", "700 W", "microbenchmarks not run", "burn not run", "health status: OK"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("render lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRenderEverything(t *testing.T) {
	f := newFake(2)
	f.reasons = gpu.ReasonSWPowerCap
	h := runJudged(context.Background(), f, fakeBench{slow: map[int]float64{1: 0.5}}, Options{Source: "nvml", Burn: 30 * time.Millisecond, SampleEvery: 10 * time.Millisecond}, judge.HealthRules{})
	var out bytes.Buffer
	term.Health(&out, h)
	for _, want := range []string{"Microbenchmarks", "sgemm_fp32", "54.0 TFLOP/s", "67.0 TFLOP/s", "0.81", "Burn", "sw_power_cap",
		"GPU-to-GPU", "gpu 1", "DCGM diagnostic", "Flags", "compare.gpu_to_gpu", "health status: FLAG"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("render lacks %q:\n%s", want, out.String())
		}
	}
}

func TestInterruptKeepsMeasured(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b := &cancelAfter{n: 2, cancel: cancel}
	h := runJudged(ctx, newFake(1), b, Options{Source: "nvml"}, judge.HealthRules{})
	if len(h.GPUs[0].Bench) < 2 || !strings.Contains(strings.Join(h.Notes, ";"), "interrupted") {
		t.Errorf("bench %d notes %v", len(h.GPUs[0].Bench), h.Notes)
	}
}

type cancelAfter struct {
	n      int
	cancel func()
}

func (c *cancelAfter) Microbench(ctx context.Context, g results.GPUInfo, name string) (float64, string, error) {
	c.n--
	if c.n == 0 {
		c.cancel()
	}
	return 1, "GB/s", nil
}
func (c *cancelAfter) Burn(ctx context.Context, g results.GPUInfo) (float64, error) { return 0, nil }

func TestParseCPUList(t *testing.T) {
	cases := []struct {
		in   string
		want string
		err  bool
	}{
		{"0-3,8,10-11", "0-3,8,10-11", false},
		{"5", "5", false},
		{"", "", false},
		{"3-1", "", true},
		{"a", "", true},
	}
	for _, c := range cases {
		got, err := sysfs.ParseCPUList(c.in)
		if (err != nil) != c.err || (!c.err && compactCPUs(got) != c.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v", c.in, got, err)
		}
	}
}

func TestBindThread(t *testing.T) {
	dir := t.TempDir()
	old := nodeRoot
	nodeRoot = dir
	defer func() { nodeRoot = old }()
	os.MkdirAll(filepath.Join(dir, "node0"), 0o755)
	os.WriteFile(filepath.Join(dir, "node0", "cpulist"), []byte("0\n"), 0o644)
	done := make(chan string)
	go func() {
		b := bindThread(0)
		done <- b
	}()
	if b := <-done; !strings.Contains(b, "NUMA node 0 (0)") {
		t.Errorf("binding %q", b)
	}
	go func() {
		b := bindThread(3)
		done <- b
	}()
	if b := <-done; !strings.HasPrefix(b, "none: cannot read the CPUs of NUMA node 3") {
		t.Errorf("binding %q", b)
	}
}

// TestRealH200Result re-judges the result of a real run on 2 × H200 (nvidia-h200-x2, 60 s burn): a
// healthy host at its power limit (sw_power_cap throughout the burn) must come out ok, not flagged.
func TestRealH200Result(t *testing.T) {
	b, err := os.ReadFile("testdata/h200x2-real.json")
	if err != nil {
		t.Fatal(err)
	}
	var h results.Health
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	h.ExpectGPUs = 2 // the phase records the count it was told to expect
	judge.Health(&h, judge.HealthRules{})
	if h.Status != results.StatusOK || len(flagsOf(&h)) != 0 || len(h.Comparisons) != 6 {
		t.Fatalf("status %s flags %v comparisons %d", h.Status, flagsOf(&h), len(h.Comparisons))
	}
	for _, gh := range h.GPUs {
		if gh.Burn == nil || len(gh.Burn.Samples) != 60 || fmt.Sprint(gh.Burn.ReasonsSeen) != "[sw_power_cap]" {
			t.Errorf("gpu %d burn: %+v", gh.GPU.Index, gh.Burn)
		}
	}
	// The same host with a throttling card: hw_thermal_slowdown in one sample flags that GPU only.
	h.GPUs[1].Burn.Samples[30].ClockReasons |= gpu.ReasonHWThermalSlowdown
	judge.Health(&h, judge.HealthRules{})
	if got := fmt.Sprint(flagsOf(&h)); got != "["+CheckBurnClock+"@1]" {
		t.Errorf("flags %s", got)
	}
}

func TestFromConfigSelectsBenchmarks(t *testing.T) {
	c := config.Config{Health: config.Health{ExpectGPUs: 8, PCIe: true, PCIeMinGBs: 8, PCIeExpectedWidth: 8, Burn: config.Duration(time.Minute),
		DCGM: config.DCGM{Enabled: true, Level: 3, Timeout: config.Duration(time.Hour)}}}
	o := FromConfig(c, "nvml")
	if fmt.Sprint(o.Benchmarks) != "[pcie_h2d pcie_d2h hbm_d2d]" || o.SkipBench || o.Burn != time.Minute || o.DCGMLevel != 3 || o.ExpectGPUs != 8 {
		t.Errorf("%+v", o)
	}
	o.Burn = 0
	h := runJudged(context.Background(), newFake(1), fakeBench{}, o, judge.HealthRules{})
	if len(h.GPUs[0].Bench) != 3 {
		t.Errorf("ran %d benchmarks, want 3", len(h.GPUs[0].Bench))
	}
	c.Compare.GEMMVariancePct, c.Engine.NUMABind = 12, false
	c.ReferenceFloors = map[string]map[string]float64{"NVIDIA H200": {"gemm_bf16": 0.5}}
	if o := FromConfig(c, "sim"); !o.NoNUMABind || o.Source != "sim" || !o.Parallel {
		t.Errorf("engine.numa_bind or run.parallel_gpus not carried: %+v", o)
	}
	// The thresholds are the judge's (health measures, judge decides).
	if r := judge.HealthRulesFrom(c); r.GEMMVariancePct != 12 || r.Floors["NVIDIA H200"]["gemm_bf16"] != 0.5 || r.MinPCIeGBps != 8 || r.ExpectPCIeWidth != 8 {
		t.Errorf("compare.gemm_variance_pct, reference_floors or the PCIe keys not carried: %+v", r)
	}
	if o := FromConfig(config.Config{}, "nvml"); !o.SkipBench {
		t.Errorf("no gemm, no pcie: want SkipBench")
	}
}
