// Package health is the GPU health phase: inventory, microbenchmarks against the datasheet peak, a
// GEMM burn with 1 Hz telemetry, the interconnect, DCGM diagnostics and the busy check. It measures
// and records; judge.Health turns the result into flags and statuses (health measures, judge decides).
// It works over interfaces: a gpu.Source for inventory and telemetry (NVML, an nvidia-smi capture, or
// the simulator) and a BenchRunner for the microbenchmarks (internal/cuda, or the simulator).
package health

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/dcgm"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/results"
)

// BenchRunner runs microbenchmarks on one GPU. The real one is internal/cuda's Runner; the simulator's
// Fleet fits through SimBench.
type BenchRunner interface {
	// Microbench returns the figure of one benchmark (see results.MicrobenchNames) on GPU g: TFLOP/s or GB/s.
	Microbench(ctx context.Context, g results.GPUInfo, name string) (value float64, unit string, err error)
	// Burn runs GEMM flat out on g until ctx ends and returns the TFLOP/s it sustained.
	Burn(ctx context.Context, g results.GPUInfo) (tflops float64, err error)
}

// Describer is optionally implemented by a BenchRunner to say what each benchmark does (sizes, API).
type Describer interface{ Describe(name string) string }

// Options are the health phase's settings; zero values take the defaults noted.
type Options struct {
	Source      string        // "nvml", "nvidia-smi-xml", "sim": recorded in the result
	ExpectGPUs  int           // 0: no count check
	Parallel    bool          // run every GPU's benchmarks and burn at once
	SkipBench   bool          // inventory (and burn/DCGM) only
	Benchmarks  []string      // which of results.MicrobenchNames to run (in that order); nil: all
	Burn        time.Duration // 0: no burn
	SampleEvery time.Duration // telemetry interval during a burn (default 1 s)
	DCGM        bool          // run `dcgmi diag`
	DCGMLevel   int           // default 2
	DCGMTimeout time.Duration // default 15 min
	DCGMBinary  string        // default "dcgmi"
	Links       LinkRunner    // GPU-to-GPU copies and all-reduce; nil: topology only
	NoNUMABind  bool          // do not bind the CPU side of benchmarks to the GPU's NUMA node
	Progress    io.Writer     // one line per step (stderr in the CLI); nil: quiet
	// Catalog gives each GPU's datasheet peaks (nil: the built-in catalog).
	Catalog *catalog.Catalog

	// The busy check (issue 26). AllowBusy measures a GPU another process uses (recorded in
	// results.Busy.Allowed: the judge then notes it instead of flagging it). BusyReadings × BusyGap is
	// how long a live GPU is read for (3, 0.5 s).
	AllowBusy    bool
	BusyReadings int
	BusyGap      time.Duration

	// sample reads a GPU's telemetry (the source's), for the clock-event reasons a benchmark ran
	// under (Run sets it).
	sample func(gpu int) (results.PowerSample, error)
}

func (o *Options) defaults() {
	d := results.DefaultHealth()
	o.SampleEvery = nz(o.SampleEvery, time.Second)
	o.DCGMLevel = cmp.Or(o.DCGMLevel, d.DCGMLevel)
	o.DCGMTimeout = nz(o.DCGMTimeout, d.DCGMTimeout)
	o.BusyReadings = nz(o.BusyReadings, 3)
	o.BusyGap = nz(o.BusyGap, 500*time.Millisecond)
}

// Run is the health phase of one host. It never returns nil and never stops at the first problem:
// what was measured is kept, what broke says so in its own Error. It judges nothing: judge.Health
// does, with the thresholds (the GPU count expected is recorded in the result for it).
func Run(ctx context.Context, src gpu.Source, bench BenchRunner, o Options) *results.Health {
	o.defaults()
	h := &results.Health{Source: o.Source, ExpectGPUs: o.ExpectGPUs, Parallel: o.Parallel}
	o.sample = src.Sample
	gpus, err := src.GPUs()
	if err != nil {
		h.Status, h.Error = results.StatusFailed, fmt.Sprintf("GPU inventory: %v", err)
		return h
	}
	for _, g := range gpus {
		h.GPUs = append(h.GPUs, results.GPUHealth{GPU: g})
	}
	o.progress("inventory: %d GPU(s) from %s", len(gpus), o.Source)
	readKernelLog(src, h)
	readInterconnect(src, h)
	if ic := h.Interconnect; ic != nil {
		if spec, known := o.Catalog.LookupGPU(h.GPUs[0].GPU.Name); known {
			ic.DatasheetModel, ic.DatasheetNVLinks = spec.Key, spec.NVLinks()
		}
	}
	checkBusy(ctx, src, h, o)

	switch {
	case bench == nil && !o.SkipBench:
		h.Notes = append(h.Notes, fmt.Sprintf("microbenchmarks not run: no GPU to run them on (source %s)", o.Source))
	case bench != nil && !o.SkipBench:
		runBenchSteps(ctx, bench, h, o)
	}
	if o.Links != nil && !o.SkipBench {
		runLinks(ctx, o.Links, h, o)
	}
	if o.Burn > 0 {
		if bench == nil {
			h.Notes = append(h.Notes, fmt.Sprintf("burn not run: no GPU to run it on (source %s)", o.Source))
		} else {
			step(h, "burn", schedule(o, len(h.GPUs)), func() {
				forEachGPU(ctx, h, o, func(gh *results.GPUHealth) { gh.Burn = runBurn(ctx, src, bench, gh, o) })
			})
			if o.Source == "sim" {
				h.Notes = append(h.Notes, "simulated burn: the virtual GPUs' telemetry follows attached engines only, so burn samples show them idle; the TFLOP/s is the simulator's BF16 GEMM figure")
			}
		}
	}
	rereadLinkErrors(src, h)
	step(h, "dcgm", "", func() { h.DCGM = runDCGM(ctx, o) })
	if ctx.Err() != nil {
		h.Notes = append(h.Notes, "interrupted: the figures above are what was measured before the stop")
	}
	LinkPeaks(h, o.Catalog)
	return h
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "health: "+format+"\n", args...)
	}
}

// forEachGPU runs f for every GPU: one after another by default, all at once with Parallel. Each call
// runs on its own goroutine, bound to the GPU's NUMA node unless NoNUMABind.
func forEachGPU(ctx context.Context, h *results.Health, o Options, f func(*results.GPUHealth)) {
	run := func(gh *results.GPUHealth) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if o.NoNUMABind || o.Source == "sim" {
				gh.Binding = cmp.Or(gh.Binding, map[bool]string{true: "none: --no-numa-bind", false: "none: simulated GPUs"}[o.NoNUMABind])
			} else {
				gh.Binding = bindThread(gh.GPU.NUMANode)
			}
			f(gh)
		}()
		<-done
	}
	if !o.Parallel {
		for i := range h.GPUs {
			if ctx.Err() != nil {
				return
			}
			run(&h.GPUs[i])
		}
		return
	}
	var wg sync.WaitGroup
	for i := range h.GPUs {
		wg.Add(1)
		go func(gh *results.GPUHealth) { defer wg.Done(); run(gh) }(&h.GPUs[i])
	}
	wg.Wait()
}

// runBenches measures the benchmarks on one GPU (those only (nil: all) lets through) and sets each
// figure beside its datasheet peak.
func runBenches(ctx context.Context, bench BenchRunner, gh *results.GPUHealth, o Options, only func(string) bool) {
	spec, known := o.Catalog.LookupGPU(gh.GPU.Name)
	if !known {
		addNote(gh, fmt.Sprintf("%q is not in the GPU catalog: figures are shown without a datasheet peak", gh.GPU.Name))
	}
	for _, name := range results.MicrobenchNames() {
		if ctx.Err() != nil {
			return
		}
		if o.Benchmarks != nil && !slices.Contains(o.Benchmarks, name) || only != nil && !only(name) {
			continue
		}
		o.progress("gpu %d: %s", gh.GPU.Index, name)
		mb := results.Microbench{Name: name, Status: results.StatusOK}
		if d, ok := bench.(Describer); ok {
			mb.Params = d.Describe(name)
		}
		peak := 0.0
		if known {
			peak = Peak(spec, name)
		}
		if known && peak == 0 {
			// No datasheet figure: the benchmark does not apply to this GPU (a GB200's GPUs have no
			// PCIe host link). Skipped, not failed: a healthy card must not fail for it.
			mb.Status, mb.Params = results.StatusSkipped, fmt.Sprintf("not applicable: %s has no datasheet figure for %s", spec.Key, name)
			gh.Bench = append(gh.Bench, mb)
			continue
		}
		var v float64
		var unit string
		var check *results.ResultCheck
		var err error
		mb.ClockReasons = gpu.ReasonNames(withReasons(o, gh.GPU.Index, func() { v, unit, check, err = microbench(ctx, bench, gh.GPU, name) }))
		mb.Check = check
		if err != nil {
			mb.Status, mb.Error = results.StatusFailed, err.Error()
		} else {
			mb.Value, mb.Unit = v, unit
			if peak > 0 && strings.HasPrefix(name, "pcie_") {
				peak = hostLinkPeak(gh, spec, peak, v)
			}
			if peak > 0 {
				mb.Peak, mb.Ratio = new(peak), new(v/peak)
			}
		}
		gh.Bench = append(gh.Bench, mb)
	}
}

// Peak is the datasheet figure a benchmark is measured against. PCIe uses the link the GPU is specified
// for (catalog), not the link it trained at: a degraded link then shows as a low ratio; hostLinkPeak
// lowers it to a slower slot's.
func Peak(spec catalog.GPU, name string) float64 {
	return map[string]float64{"sgemm_fp32": spec.FP32TFLOPS, "gemm_tf32": spec.TF32TFLOPS, "gemm_bf16": spec.BF16TFLOPS,
		"pcie_h2d": spec.PCIeGBps(), "pcie_d2h": spec.PCIeGBps(), "hbm_d2d": spec.HBMGBps}[name]
}

func runDCGM(ctx context.Context, o Options) *results.DCGM {
	skip := map[string]string{"sim": "simulated GPUs", "nvidia-smi-xml": "inventory read from a capture, not a live host"}[o.Source]
	if skip == "" && !o.DCGM {
		skip = "disabled (--dcgm=false)"
	}
	if skip != "" {
		return &results.DCGM{Status: results.StatusSkipped, Level: o.DCGMLevel, Note: "skipped: " + skip}
	}
	o.progress("dcgm: dcgmi diag -r %d", o.DCGMLevel)
	return dcgm.Run(ctx, dcgm.Options{Level: o.DCGMLevel, Timeout: o.DCGMTimeout, Binary: o.DCGMBinary})
}

// schedule says how a step that runs on every GPU ran.
func schedule(o Options, n int) string {
	if o.Parallel && n > 1 {
		return fmt.Sprintf("%d GPUs at once", n)
	}
	return "one GPU at a time"
}

// hostLinkPeak is the PCIe peak a copy of v GB/s is measured against: the card's datasheet link
// (peak), or the slower one this host offers it. The inventory's maximum generation and width are the
// most both ends of the link support (NVML: "possible with this device and system"), so a Gen4 or x8
// slot is the host's design, not a fault of the card; a link that trained below them still shows as
// a low ratio. A link that carried more than it claims is a virtual one (a VM's root port), which
// bounds nothing: the card's datasheet stays the peak.
func hostLinkPeak(gh *results.GPUHealth, spec catalog.GPU, peak, v float64) float64 {
	p := gh.GPU.PCIe
	gen, width := min(spec.PCIeGen, cmp.Or(p.GenMax, spec.PCIeGen)), min(spec.PCIeWidth, cmp.Or(p.WidthMax, spec.PCIeWidth))
	host := catalog.PCIeLinkGBps(gen, width)
	if host <= 0 || host >= peak || v > host {
		return peak
	}
	addNote(gh, fmt.Sprintf("the host's PCIe link offers Gen%d x%d, the %s Gen%d x%d: PCIe figures are measured against Gen%d x%d (%.0f GB/s), and host-to-GPU copies (model loads, KV-cache offload) run at that speed",
		gen, width, spec.Key, spec.PCIeGen, spec.PCIeWidth, gen, width, host))
	return host
}

// benchReasonsEvery is how often a benchmark's clock-event reasons are read: a GEMM lasts a second
// or two.
const benchReasonsEvery = 100 * time.Millisecond

// withReasons runs measure while reading GPU i's clock-event reasons, and returns every reason seen
// (read every benchReasonsEvery and as it ends; gpu_idle, which a read between kernels catches, is
// left out): the judge tells the system's power brake from the GPU's own speed by them.
func withReasons(o Options, i int, measure func()) uint64 {
	if o.sample == nil {
		measure()
		return 0
	}
	var seen atomic.Uint64
	read := func() {
		if s, err := o.sample(i); err == nil {
			seen.Or(s.ClockReasons)
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(benchReasonsEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				read()
			}
		}
	}()
	measure()
	close(stop)
	<-done
	read()
	return seen.Load() &^ results.ClockGPUIdle
}
