package pipeline

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/roofline"
	"github.com/gpuvet/gpuvet/internal/sim"
	"github.com/gpuvet/gpuvet/internal/sysfs"
)

// cpuBudget is the share of gpuvet's free cores the engines loaded at once may need together. The
// client self-check calls a rung client-limited at 90 % of the cores (load.CPULimit) or when
// requests leave late, and lag shows well before the CPU is full, so auto keeps to half.
const cpuBudget = 0.5

// unknownDemandTokS is the output tok/s per engine assumed when the GPU or model is not in the
// catalog (no roofline bound): the most one H200 serving Qwen3-8B can stream at batch 256.
const unknownDemandTokS = 40_000

// ParallelInputs are what the auto choice of run.parallel_gpus stands on.
type ParallelInputs struct {
	Slots       int     // engines to load
	FreeCores   float64 // CPU gpuvet may use
	CoresSource string
	TokenCostUs float64 // CPU µs the load generator (and, on the simulator, the engine) spends per token
	CostSource  string
	DemandTokS  float64 // the most output tok/s one engine can stream
	DemandSrc   string
}

// ChooseParallel decides how many engines are loaded at once: the plan's count, or for auto as many
// as fit cpuBudget of the free cores, each reading DemandTokS tokens a second at TokenCostUs each.
// At least one, at most every slot.
func ChooseParallel(n config.GPUsAtOnce, in ParallelInputs) results.ParallelChoice {
	if !n.Auto() {
		g := min(int(n), max(1, in.Slots))
		return results.ParallelChoice{Mode: "fixed", GPUs: g, Slots: in.Slots,
			Reason: fmt.Sprintf("run.parallel_gpus = %d (the plan's): %d of %d engines at once", int(n), g, in.Slots)}
	}
	c := results.ParallelChoice{Mode: "auto", Slots: in.Slots, FreeCores: in.FreeCores, CoresSource: in.CoresSource,
		TokenCostUs: in.TokenCostUs, CostSource: in.CostSource, DemandTokS: in.DemandTokS, DemandSource: in.DemandSrc, Budget: cpuBudget}
	c.CoresPerGPU = in.DemandTokS * in.TokenCostUs / 1e6
	fit := in.Slots
	if c.CoresPerGPU > 0 {
		fit = int(math.Floor(cpuBudget * in.FreeCores / c.CoresPerGPU))
	}
	c.GPUs = max(1, min(in.Slots, fit))
	need := fmt.Sprintf("each engine needs up to %.2f cores (%.0f tok/s × %.1f µs/token); %.0f %% of %.1f free cores (%s) is %.1f",
		c.CoresPerGPU, in.DemandTokS, in.TokenCostUs, cpuBudget*100, in.FreeCores, in.CoresSource, cpuBudget*in.FreeCores)
	switch {
	case in.Slots <= 1:
		c.Reason = fmt.Sprintf("auto: 1 engine, nothing to load beside it; %s", need)
		if c.GPUs == 1 && fit < 1 {
			c.Reason += ": short even for it, so the client self-check may find its rungs client-limited"
		}
	case c.GPUs == in.Slots:
		c.Reason = fmt.Sprintf("auto: all %d engines at once: %s, enough for %d", in.Slots, need, max(fit, in.Slots))
	default:
		c.Reason = fmt.Sprintf("auto: %d of %d engines at once (the client's CPU limits it): %s; give gpuvet more cores, or set run.parallel_gpus", c.GPUs, in.Slots, need)
	}
	return c
}

// choose resolves run.parallel_gpus for this run's slots, records the choice and sets
// r.cfg.Run.ParallelGPUs to the count.
func (r *run) choose(ctx context.Context, sps []slotPlan) {
	in := ParallelInputs{Slots: len(sps)}
	if r.cfg.Run.ParallelGPUs.Auto() && len(sps) > 0 {
		cores := r.deps.Cores
		if cores == nil {
			cores = func() (float64, string) { return freeCores("/") }
		}
		in.FreeCores, in.CoresSource = cores()
		in.TokenCostUs, in.CostSource = tokenCost(ctx)
		in.DemandTokS, in.DemandSrc = demandTokS(r.deps.Catalog, sps[0].slot.GPUName, r.cfg)
	}
	c := ChooseParallel(r.cfg.Run.ParallelGPUs, in)
	r.cfg.Run.ParallelGPUs = config.GPUsAtOnce(c.GPUs)
	r.mu.Lock()
	r.sum.Meta.ParallelGPUs = c.GPUs
	r.sum.Meta.Parallel = &c
	r.mu.Unlock()
	r.progress("parallel: %s", c.Reason)
}

// freeCores is the CPU gpuvet may use: its affinity mask, fewer when its cgroup's CPU quota allows
// fewer. root is where the cgroup files are read under ("/" on a host).
func freeCores(root string) (float64, string) {
	aff := runtime.NumCPU() // the affinity mask the process started with
	cores, src := float64(aff), fmt.Sprintf("affinity %d CPUs", aff)
	if q, where := cgroupQuota(root); q > 0 {
		src += fmt.Sprintf(", %s %.2f", where, q)
		cores = min(cores, q)
	}
	return cores, src
}

// cgroupQuota is the tightest CPU quota of this process's cgroup and its ancestors (v2 cpu.max,
// else v1 cpu.cfs_quota_us), in cores, and the file it came from; 0 when none is set or readable.
func cgroupQuota(root string) (float64, string) {
	b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, ""
	}
	best, where := 0.0, ""
	take := func(q float64, file string) {
		if q > 0 && (best == 0 || q < best) {
			best, where = q, file
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrl, path := parts[1], parts[2]
		for dir := path; ; dir = filepath.Dir(dir) {
			switch {
			case parts[0] == "0" && ctrl == "": // v2: one hierarchy
				f := filepath.Join(root, "sys/fs/cgroup", dir, "cpu.max")
				if s, err := os.ReadFile(f); err == nil {
					if q, err := sysfs.ParseCPUMax(string(s)); err == nil {
						take(q, "cgroup cpu.max")
					}
				}
			case strings.Contains(","+ctrl+",", ",cpu,"):
				for _, mount := range []string{"cpu,cpuacct", "cpu"} {
					d := filepath.Join(root, "sys/fs/cgroup", mount, dir)
					q, qerr := os.ReadFile(filepath.Join(d, "cpu.cfs_quota_us"))
					p, perr := os.ReadFile(filepath.Join(d, "cpu.cfs_period_us"))
					if qerr == nil && perr == nil {
						if v, err := sysfs.ParseCFSQuota(string(q), string(p)); err == nil {
							take(v, "cgroup cpu.cfs_quota_us")
						}
						break
					}
				}
			}
			if dir == "/" || dir == "." || dir == "" {
				break
			}
		}
	}
	return best, where
}

// demandTokS is the most output tok/s one engine can stream: the GPU × model roofline bound at the
// largest batch the knee search can reach (max_num_seqs, else load.max_concurrency).
func demandTokS(cat *catalog.Catalog, gpuName string, cfg config.Config) (float64, string) {
	batch := maxNumSeqs(cfg)
	if batch <= 0 {
		batch = max(cfg.Load.MaxConcurrency, 1)
	}
	model := ""
	if len(cfg.Models) > 0 {
		model = cfg.Models[0]
	}
	g, okG := cat.LookupGPU(gpuName)
	m, src, okM := cat.ResolveModel(model)
	if !okG || !okM {
		return unknownDemandTokS, fmt.Sprintf("%d tok/s assumed (GPU %q or model %q has no catalog figures)", unknownDemandTokS, gpuName, model)
	}
	ctx := float64(cfg.Load.PromptTokens) + float64(cfg.Load.OutputTokens)/2
	tp := max(1, cfg.Engine.TP)
	v := roofline.DecodeTokS(g, m, batch, ctx, tp)
	if v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return unknownDemandTokS, fmt.Sprintf("%d tok/s assumed (no roofline bound for %s × %s)", unknownDemandTokS, g.Key, src)
	}
	return v, fmt.Sprintf("roofline bound of %s × %s (%s) at batch %d", g.Key, model, src, batch)
}

// The token cost is measured once per process (tests, a fleet node reuse it).
var (
	costOnce sync.Once
	costUs   float64
	costSrc  string
)

// costFallbackUs is the token cost assumed when the measurement fails: the client and the
// simulator together on a busy 2-core VM (docs/load-client.md: 10–15 µs for the client alone).
const costFallbackUs = 40

// tokenCost measures the CPU the load generator spends per streamed token: one second of 64
// streams against an in-process fixed-mode simulator. The simulator's share is in it: an upper
// bound of the client's alone in front of a real engine.
func tokenCost(ctx context.Context) (float64, string) {
	costOnce.Do(func() { costUs, costSrc = measureTokenCost(ctx) })
	return costUs, costSrc
}

func measureTokenCost(ctx context.Context) (float64, string) {
	fallback := func(err error) (float64, string) {
		return costFallbackUs, fmt.Sprintf("%d µs assumed: the measurement failed (%v)", costFallbackUs, err)
	}
	srv, err := sim.Listen(sim.Config{Model: "calibrate", TTFT: 2 * time.Millisecond, ITL: 2 * time.Millisecond}, "127.0.0.1:0")
	if err != nil {
		return fallback(err)
	}
	defer srv.Close()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	l, err := load.Run(cctx, load.Options{URL: srv.URL(), Model: "calibrate", Config: results.LoadConfig{
		Profile: "concurrency", API: "completions", Concurrency: 64, PromptTokens: 32, OutputTokens: 100,
		MaxDuration: results.Duration(time.Second), Warmup: "0", Reader: "auto"}})
	if err != nil {
		return fallback(err)
	}
	if len(l.Runs) == 0 || l.Runs[0].OutputTokS <= 0 || l.Client.CPUPercent <= 0 {
		return fallback(fmt.Errorf("no tokens streamed"))
	}
	r := l.Runs[0]
	us := l.Client.CPUPercent / 100 / r.OutputTokS * 1e6
	return us, fmt.Sprintf("measured: 64 streams, %.0f tok/s for %.1f s, client and an in-process simulator together at %.0f %% of a core", r.OutputTokS, r.WindowSeconds, l.Client.CPUPercent)
}
