package sim

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/results"
)

// FleetConfig describes a host's worth of simulated GPUs.
type FleetConfig struct {
	GPU            string  // catalog key or exact nvidia-smi name: "H100", "NVIDIA H200"
	Count          int     // number of GPUs (≥ 1)
	StragglerIndex int     // the GPU that is slower; -1: none
	StragglerPct   float64 // how much slower, in percent (30: it runs at 0.7 of the others)
	// NodeSlowdownPct slows every GPU by this share (5: all run at 0.95 of a healthy one): a node
	// that ages as a whole, seen by no GPU-to-GPU comparison, only by the node's history.
	NodeSlowdownPct float64
	// EngineDriftPct makes every serving engine's speed wander between 1 and 1 − EngineDriftPct/100
	// over time (drift.go): the engine's drift between runs, not the GPU's. 0: none.
	EngineDriftPct float64
	Seed           int64  // UUIDs and microbenchmark noise derive from it
	LinkFault      string // "GPU[:down|slow|errors]": an NVLink fault on one GPU (see links.go); "": none
	// CoTenant puts another process on one GPU for part of the run (see cotenant.go):
	// "GPU[:FROM[-TO]]", e.g. "1" or "1:5s-20s"; "": none.
	CoTenant string
	// Corrupt makes one GPU compute wrong answers: "GPU", "" none. Throttle slows one GPU with a
	// clock-event reason: "GPU[:REASON[:FROM[-TO]]]", "" none (correct.go).
	Corrupt  string
	Throttle string
	// EngineFault makes one GPU's engine misbehave: "GPU:KIND" with KIND short, cut, traceback or
	// exit (enginefault.go); "": none. The GPU itself stays healthy.
	EngineFault string
	// RecoveryAction shows NVML's GPU recovery action on one GPU ("GPU:ACTION", RecoveryActionNames);
	// DriverFault plays another driver signal ("GPU:KIND", DriverFaultKinds). "": none.
	RecoveryAction string
	DriverFault    string
	// HBMHidden hides part of one GPU's memory from its engine: "GPU[:SHARE]" (SHARE default 0.5);
	// "": none (hbmhidden.go). Its KV cache is smaller, so it preempts at shorter contexts.
	HBMHidden string
	// Catalog is where GPU is looked up (nil: the built-in catalog).
	Catalog *catalog.Catalog
}

// Fleet is a set of virtual GPUs whose power, clock and temperature follow the load of the engines
// attached to them (Config.Fleet / Config.GPUIndex). Safe for concurrent use.
type Fleet struct {
	cfg   FleetConfig
	gpu   catalog.GPU
	start time.Time
	mu    sync.Mutex
	gpus  []vgpu
	// fault is the parsed LinkFault; linkReads counts Interconnect reads (the "errors" fault grows with them).
	fault     gpuFault
	linkReads int
	cotenant  coTenant
	corrupt   int
	throttle  throttle
	// engineFault, recovery and driverFault are the parsed EngineFault, RecoveryAction and DriverFault.
	engineFault, recovery, driverFault gpuFault
	// drift is the engines' speed drift (EngineDriftPct; nil: none).
	drift *drift
	hbm   hbmHidden
}

type vgpu struct {
	busy     time.Duration // engine busy time since the last sample
	usedMiB  int64         // memory an attached engine holds (weights + KV cache, as vLLM reserves it)
	active   int           // fixed-mode streams in flight (no engine steps to count)
	util     float64       // smoothed utilisation 0..1
	tempC    float64
	sampled  bool
	lastWall time.Time
	// loadedUntil is the end of an outside full load (Load, a simulated burn): NVML reports the
	// utilisation of its last sample period (≤ 1 s), so a card under a burn reads busy at once.
	loadedUntil time.Time
	// benchUntil is shortly after the last health benchmark (Microbench): a throttle configured on
	// the card shows its reason in a sample then, as a real card's would while its GEMM ran, without
	// the card reading busy afterwards.
	benchUntil time.Time
}

// Typical efficiencies of the microbenchmarks against the datasheet peak, from a real H200
// (fixtures/h200/README.md): cuBLAS SGEMM 0.81, TF32 0.92, BF16 0.79, pinned PCIe 0.87 each way,
// HBM device-to-device 0.86.
var microEff = map[string]struct {
	eff  float64
	unit string
	peak func(catalog.GPU) float64
}{
	"sgemm_fp32": {0.81, "TFLOP/s", func(g catalog.GPU) float64 { return g.FP32TFLOPS }},
	"gemm_tf32":  {0.92, "TFLOP/s", func(g catalog.GPU) float64 { return g.TF32TFLOPS }},
	"gemm_bf16":  {0.79, "TFLOP/s", func(g catalog.GPU) float64 { return g.BF16TFLOPS }},
	"pcie_h2d":   {0.87, "GB/s", catalog.GPU.PCIeGBps},
	"pcie_d2h":   {0.87, "GB/s", catalog.GPU.PCIeGBps},
	"hbm_d2d":    {0.86, "GB/s", func(g catalog.GPU) float64 { return g.HBMGBps }},
}

const ambientC = 30.0

// NewFleet checks cfg and builds the fleet. Errors name the field.
func NewFleet(cfg FleetConfig) (*Fleet, error) {
	g, err := lookupGPU(cfg.Catalog, cfg.GPU)
	if err != nil {
		return nil, err
	}
	if cfg.Count < 1 || cfg.Count > 1024 {
		return nil, fmt.Errorf("count: must be 1–1024 GPUs, got %d", cfg.Count)
	}
	if cfg.StragglerIndex >= cfg.Count || cfg.StragglerIndex < -1 {
		return nil, fmt.Errorf("straggler index: must be -1 (none) or 0–%d, got %d", cfg.Count-1, cfg.StragglerIndex)
	}
	if err := cmp.Or(checkPct("straggler pct", cfg.StragglerPct), checkPct("node slowdown pct", cfg.NodeSlowdownPct),
		checkPct("engine drift pct", cfg.EngineDriftPct)); err != nil {
		return nil, err
	}
	// Every form is read; the first error (in this order) is the one told.
	fault, err := parseLinkFault(cfg.LinkFault, cfg.Count)
	if err == nil && fault.gpu >= 0 && fault.kind != "slow" && g.NVLinks() == 0 {
		err = fmt.Errorf("link fault %q: the %s has no NVLink; only the slow kind applies", cfg.LinkFault, g.Key)
	}
	ct, ctErr := parseCoTenant(cfg.CoTenant, cfg.Count)
	corrupt, corruptErr := parseCorrupt(cfg.Corrupt, cfg.Count)
	th, thErr := parseThrottle(cfg.Throttle, cfg.Count)
	efGPU, efKind, efErr := ParseEngineFault(cfg.EngineFault, cfg.Count)
	raGPU, raKind, raErr := ParseRecoveryAction(cfg.RecoveryAction, cfg.Count)
	dfGPU, dfKind, dfErr := ParseDriverFault(cfg.DriverFault, cfg.Count)
	hbm, hbmErr := parseHBMHidden(cfg.HBMHidden, cfg.Count)
	if err := cmp.Or(err, ctErr, corruptErr, thErr, efErr, raErr, dfErr, hbmErr); err != nil {
		return nil, err
	}
	f := &Fleet{cfg: cfg, gpu: g, start: time.Now(), gpus: make([]vgpu, cfg.Count), fault: fault, cotenant: ct, corrupt: corrupt, throttle: th,
		engineFault: gpuFault{efGPU, efKind}, recovery: gpuFault{raGPU, raKind}, driverFault: gpuFault{dfGPU, dfKind}, hbm: hbm}
	f.drift = newDrift(cfg.EngineDriftPct, f.start)
	for i := range f.gpus {
		f.gpus[i].tempC = ambientC + 5
	}
	return f, nil
}

func lookupGPU(cat *catalog.Catalog, key string) (catalog.GPU, error) {
	g, ok := cat.LookupGPU(key)
	if !ok {
		return g, fmt.Errorf("gpu: unknown GPU %q; known: %s (or add it with a catalog file)",
			key, strings.Join(cat.GPUKeys(), ", "))
	}
	return g, nil
}

func checkPct(name string, pct float64) error {
	if !(pct >= 0 && pct < 100) { // NaN too
		return fmt.Errorf("%s: must be in [0, 100), got %v", name, pct)
	}
	return nil
}

// GPU is the catalog entry the fleet is made of.
func (f *Fleet) GPU() catalog.GPU { return f.gpu }

// Count is the number of GPUs.
func (f *Fleet) Count() int { return f.cfg.Count }

func (f *Fleet) check(i int) error {
	if i < 0 || i >= f.cfg.Count {
		return fmt.Errorf("gpu index %d: the fleet has GPUs 0–%d", i, f.cfg.Count-1)
	}
	return nil
}

func (f *Fleet) uuid(i int) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%s", f.cfg.Seed, i, f.gpu.Key)
	a := h.Sum64()
	h.Write([]byte("b"))
	b := h.Sum64()
	return fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", uint32(a>>32), uint16(a>>16), uint16(a), uint16(b>>48), b&0xffffffffffff)
}

func (f *Fleet) maxClock() int {
	if f.gpu.MaxSMClockMHz > 0 {
		return f.gpu.MaxSMClockMHz
	}
	return 1980
}

func (f *Fleet) idleW() float64 {
	if f.gpu.IdleW > 0 {
		return f.gpu.IdleW
	}
	return math.Round(f.gpu.TDPW * 0.12)
}

// GPUs is the inventory as a health phase reads it from NVML: catalog names, seeded UUIDs, PCIe at
// its maximum, NUMA unknown (-1), no ECC errors.
func (f *Fleet) GPUs() ([]results.GPUInfo, error) {
	out := make([]results.GPUInfo, f.cfg.Count)
	for i := range out {
		s, _ := f.sample(i, false) // an inventory read must not reset a sampler's window
		out[i] = results.GPUInfo{
			Index: i, Name: f.gpu.Names[0], UUID: f.uuid(i), Serial: fmt.Sprintf("SIM%010d", i),
			PCIBusID: busID(i), NUMANode: -1,
			VBIOS: "96.00.SIM.00.01", ComputeCapability: f.gpu.ComputeCap, Architecture: f.gpu.Architecture,
			MemoryTotalMiB: int64(f.gpu.MemoryGiB * 1024), MemoryUsedMiB: new(s.MemUsedMiB), // the engine's and the co-tenant's
			DriverVersion: "580.159.04", CUDAVersion: "13.0",
			PCIe: results.PCIeLink{GenCurrent: f.gpu.PCIeGen, GenMax: f.gpu.PCIeGen,
				WidthCurrent: f.gpu.PCIeWidth, WidthMax: f.gpu.PCIeWidth},
			PowerLimitW: new(f.gpu.TDPW), PowerDrawW: new(s.PowerW), MaxSMClockMHz: new(f.maxClock()), SMClockMHz: new(s.SMClockMHz),
			TemperatureC: new(s.TempC), Persistence: new(true), ECCEnabled: new(true),
			ECC:          results.ECC{VolatileUncorrected: new(int64(0)), AggregateUncorrected: new(int64(0))},
			RemappedRows: &results.RemappedRows{},
			ClockEvents:  results.ClockEvents{Mask: s.ClockReasons, Names: results.ClockEventNames(s.ClockReasons)},
		}
		f.driverSignals(i, &out[i])
	}
	return out, nil
}

// update applies fn to GPUs first..first+n−1 under the lock: an attached server records its engine's
// busy time, the memory it holds, and its fixed-mode streams (no engine steps to measure load by).
func (f *Fleet) update(first, n int, fn func(g *vgpu)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := first; i < first+n; i++ {
		fn(&f.gpus[i])
	}
}

// Load marks GPU i busy for d from outside an engine: a simulated GEMM burn (`gpuvet health --sim
// --burn`) calls it so the burn's telemetry shows a loaded card, not an idle one.
func (f *Fleet) Load(i int, d time.Duration) error {
	if err := f.check(i); err != nil {
		return err
	}
	f.update(i, 1, func(g *vgpu) {
		g.busy += d
		if until := time.Now().Add(d); until.After(g.loadedUntil) {
			g.loadedUntil = until
		}
	})
	return nil
}

// Sample is one NVML-like reading of GPU i: utilisation is the attached engine's busy fraction since
// the previous sample (fixed mode: streams in flight ÷ 64), power goes from idle to the limit with
// it, the SM clock sags under the power cap, temperature approaches 30 °C + 50 °C × utilisation with
// a 20 s time constant.
func (f *Fleet) Sample(i int) (results.PowerSample, error) { return f.sample(i, true) }

// sample reads GPU i; consume starts a new utilisation window (Sample), else the window goes on.
func (f *Fleet) sample(i int, consume bool) (results.PowerSample, error) {
	if err := f.check(i); err != nil {
		return results.PowerSample{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	g := &f.gpus[i]
	now := time.Now()
	util := g.util
	if g.sampled {
		if el := now.Sub(g.lastWall); el > 0 {
			util = math.Min(1, g.busy.Seconds()/el.Seconds())
		}
	}
	if g.active > 0 {
		util = math.Max(util, math.Min(1, float64(g.active)/64))
	}
	if now.Before(g.loadedUntil.Add(250*time.Millisecond)) || f.coTenantOn(i, now) {
		util = 1 // a burn, or the co-tenant's GEMM loop: the card is flat out whatever gpuvet does
	}
	dt := now.Sub(g.lastWall).Seconds()
	if !g.sampled {
		dt = 0
	}
	target := ambientC + 5 + 50*util
	temp := g.tempC + (target-g.tempC)*(1-math.Exp(-dt/20))
	if consume {
		g.tempC, g.busy, g.lastWall, g.sampled, g.util = temp, 0, now, true, util
	}

	power := f.idleW() + (f.gpu.TDPW*0.97-f.idleW())*util
	clk := float64(f.maxClock()) * (1 - 0.1*util)
	var reasons uint64
	switch {
	case util < 0.05:
		reasons, clk = 0x1, 345
	case util > 0.9:
		reasons = 0x4
	}
	if bit, on := f.throttleOn(i, now); on && (util >= 0.05 || now.Before(g.benchUntil)) {
		// A throttled card under load: the reason set, clocks and power cut with its speed; a thermal
		// reason comes with the heat that caused it.
		reasons, clk, power = bit, clk*ThrottleSpeed, power*ThrottleSpeed
		if bit == 0x20 || bit == 0x40 {
			temp = math.Max(temp, 91)
		}
	}
	used := g.usedMiB
	if f.coTenantOn(i, now) {
		used += CoTenantMiB
	}
	return results.PowerSample{T: now.Sub(f.start).Seconds(), PowerW: math.Round(power*10) / 10,
		SMClockMHz: int(clk), TempC: int(math.Round(temp)), ClockReasons: reasons, UtilPct: int(util * 100),
		MemClockMHz: simMemClockMHz, MemUtilPct: int(util * 60), MemUsedMiB: used}, nil
}

// Speed is GPU i's speed relative to a healthy one now: 1 − NodeSlowdownPct/100, times
// 1 − StragglerPct/100 for the straggler, times CoTenantSpeed while a co-tenant runs on it.
func (f *Fleet) Speed(i int) float64 {
	sp := 1 - f.cfg.NodeSlowdownPct/100
	if i == f.cfg.StragglerIndex {
		sp *= 1 - f.cfg.StragglerPct/100
	}
	if f.coTenantOn(i, time.Now()) {
		sp *= CoTenantSpeed
	}
	return sp
}

// Microbench is a simulated microbenchmark on GPU i (results.MicrobenchNames): datasheet peak ×
// typical efficiency × Speed(i) ± 1 % seeded noise.
func (f *Fleet) Microbench(i int, name string) (float64, string, error) {
	if err := f.check(i); err != nil {
		return 0, "", err
	}
	me, ok := microEff[name]
	if !ok {
		return 0, "", fmt.Errorf("microbenchmark %q: known are %s", name, strings.Join(results.MicrobenchNames(), ", "))
	}
	f.update(i, 1, func(g *vgpu) { g.benchUntil = time.Now().Add(250 * time.Millisecond) })
	peak := me.peak(f.gpu)
	if peak == 0 {
		return 0, me.unit, fmt.Errorf("%s on %s: not applicable (no datasheet figure, e.g. no PCIe host link)", name, f.gpu.Key)
	}
	throttle := f.ThrottleSpeed(i)
	if strings.HasPrefix(name, "pcie_") {
		throttle = 1 // a host copy runs at the link's pace, not the SM clock's
	}
	return peak * me.eff * f.Speed(i) * throttle * f.noise(fmt.Sprintf("%d/%s", i, name)), me.unit, nil
}

// Close releases the fleet (nothing to release today; servers attached to it keep working).
func (f *Fleet) Close() error { return nil }
