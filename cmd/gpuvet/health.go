package main

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/cuda"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/health"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
	"github.com/gpuvet/gpuvet/internal/term"
)

// healthOptions are `gpuvet health`'s flags: Complete -> Validate -> Run (kubectl's pattern).
type healthOptions struct {
	xml, out, topoFile, nvlinkFile, ncclLib string
	sim, failOnFlag                         bool

	// The simulator's (--sim-…: sim.FleetConfig).
	simGPU, simLinkFault, simCoTenant, simCorrupt, simThrottle, simRecoveryAction, simDriverFault string
	simCount, simStraggler                                                                        int
	simStragglerPct, simNodeSlowdownPct                                                           float64

	opts    health.Options
	rules   judge.HealthRules // health measures, judge decides
	floors  map[string]string // --floor NAME=RATIO
	nodes   nodeHealths       // the schedulers' hooks on their own node (health_node.go)
	timeout time.Duration
	cf      configFlags // -c and --set: a plan whose health section the checks run with
}

func newHealthCmd() *cobra.Command {
	var f healthOptions
	cmd := &cobra.Command{
		Use:   "health",
		Short: "GPU health phase: inventory, GEMM/PCIe/HBM microbenchmarks vs datasheet peak, burn, DCGM, flags",
		Long: `Checks every GPU of this host before anything is served: inventory through NVML (count, ECC,
row remapping, PCIe link, clock-event reasons, XIDs), cuBLAS GEMM (FP32, TF32, BF16), pinned PCIe
H2D/D2H and HBM bandwidth against the detected GPU's datasheet peak, an optional GEMM burn with
1 Hz telemetry, and DCGM diagnostics when dcgmi is installed.
With two or more GPUs: the NVLink/PCIe topology (links, paths, error counters before and after),
peer-to-peer copy bandwidth per pair against its links, and an NCCL all-reduce (busbw as nccl-tests)
where a libnccl.so.2 is found (--nccl-lib).
Every figure has a datasheet floor (a share of its peak a healthy card reaches; --floor, or
reference_floors in a run's config): below it the GPU is flagged, one GPU included.
With -c (a run's config, as 'gpuvet run' resolves it) the checks and thresholds are the plan's:
its health section, reference_floors, compare.gemm_variance_pct, engine.numa_bind and
run.parallel_gpus, as a run's health phase reads them; a flag given on the command line wins.
The GPU source is still the flags' (--sim, --nvidia-smi-xml, else NVML). Before the
benchmarks, a GPU another process uses (NVML's process list, or load and memory no process of
gpuvet's explains) is flagged by name and its figures pass nothing; --allow-busy measures it anyway.

Exit code: 0 ok (or flags without --fail-on-flag), 1 a failure or a flag with --fail-on-flag,
2 bad input or no NVIDIA driver (use --sim or --nvidia-smi-xml on a host without one).`,
		Args: cobra.NoArgs,
		RunE: phases(&f),
	}
	hd, sd := results.DefaultHealth(), results.DefaultSim()
	fl := cmd.Flags()
	fl.StringVar(&f.xml, "nvidia-smi-xml", "", "read the inventory from a captured 'nvidia-smi -q -x' instead of NVML (no benchmarks)")
	fl.StringVar(&f.out, "out", "", "write the result as JSON (results.Health) to this file")
	fl.BoolVar(&f.sim, "sim", false, "use the simulator's virtual GPUs instead of real ones")
	fl.StringVar(&f.simGPU, "sim-gpu", sd.GPU, "GPU model of the simulated host (a catalog key)")
	fl.IntVar(&f.simCount, "sim-gpus", sd.GPUs, "number of simulated GPUs")
	// --sim-count was this flag's name before it took run's: HealthCheckPrograms and CronJobs
	// written with it keep working, with a word on stderr.
	fl.IntVar(&f.simCount, "sim-count", sd.GPUs, "number of simulated GPUs")
	_ = fl.MarkDeprecated("sim-count", "use --sim-gpus, as gpuvet run spells it")
	fl.IntVar(&f.simStraggler, "sim-straggler", -1, "index of a simulated GPU that runs slower (-1: none)")
	fl.Float64Var(&f.simStragglerPct, "sim-straggler-pct", sd.StragglerPct, "how much slower the straggler is (%)")
	fl.Float64Var(&f.simNodeSlowdownPct, "sim-node-slowdown-pct", 0, "slow every simulated GPU by this share (%), as sim.node_slowdown_pct: a node that only its sibling nodes show slow")
	fl.StringVar(&f.simLinkFault, "sim-link-fault", "", "inject an NVLink fault on a simulated GPU: GPU[:down|slow|errors] (e.g. 1:slow)")
	fl.StringVar(&f.topoFile, "nvidia-smi-topo", "", "with --nvidia-smi-xml: a captured 'nvidia-smi topo -m' for the GPU pairs' paths")
	fl.StringVar(&f.nvlinkFile, "nvidia-smi-nvlink", "", "with --nvidia-smi-xml: a captured 'nvidia-smi nvlink -s' for each GPU's links")
	fl.StringVar(&f.ncclLib, "nccl-lib", "", "libnccl.so.2 for the all-reduce (default: the library path, then Python environments' nvidia-nccl wheels)")
	fl.BoolVar(&f.failOnFlag, "fail-on-flag", false, "exit 1 when anything is flagged")
	o, r := &f.opts, &f.rules
	def := judge.DefaultHealthRules()
	fl.IntVar(&o.ExpectGPUs, "expect-gpus", 0, "flag when the GPU count differs (0: no check)")
	fl.IntVar(&r.ExpectPCIeWidth, "expect-pcie-width", 0, "PCIe lanes the GPUs are wired with by design (0: require the card's maximum)")
	fl.BoolVar(&o.Parallel, "parallel", false, "run every GPU's benchmarks and burn at the same time (default: one GPU at a time)")
	fl.BoolVar(&o.SkipBench, "no-bench", false, "skip the microbenchmarks")
	fl.DurationVar(&o.Burn, "burn", 0, "run GEMM flat out this long per GPU while sampling power/clock/temperature every second (e.g. 60s)")
	fl.BoolVar(&o.DCGM, "dcgm", true, "run 'dcgmi diag' when dcgmi is installed")
	fl.IntVar(&o.DCGMLevel, "dcgm-level", hd.DCGMLevel, "dcgmi diag level (1-4)")
	fl.DurationVar(&o.DCGMTimeout, "dcgm-timeout", hd.DCGMTimeout, "limit for the whole dcgmi run")
	fl.Float64Var(&r.MinPCIeGBps, "min-pcie-gbps", def.MinPCIeGBps, "flag pinned PCIe bandwidth below this (GB/s)")
	fl.Float64Var(&r.GEMMVariancePct, "gemm-variance-pct", def.GEMMVariancePct, "GPU-to-GPU tolerance for GEMM (%)")
	fl.Float64Var(&r.PCIeVariancePct, "pcie-variance-pct", def.PCIeVariancePct, "GPU-to-GPU tolerance for PCIe (%)")
	fl.BoolVar(&o.NoNUMABind, "no-numa-bind", false, "do not bind benchmark threads to the GPU's NUMA node")
	fl.Float64Var(&r.MinLinkRatio, "min-link-ratio", 0, "flag a peer copy or all-reduce below this share of its link's peak (0-1; 0: the peer_copy and all_reduce datasheet floors)")
	fl.BoolVar(&o.AllowBusy, "allow-busy", false, "measure a GPU another process uses, and note it instead of flagging it")
	fl.StringToStringVar(&f.floors, "floor", nil, "datasheet floor of a benchmark on every GPU, as a share of its peak: NAME=RATIO, e.g. gemm_bf16=0.7 (names: "+strings.Join(floorNames(), ", ")+")")
	fl.StringVar(&f.simCoTenant, "sim-cotenant", "", "put another process on a simulated GPU: GPU[:FROM[-TO]] (e.g. 0, or 1:5s-20s)")
	fl.StringVar(&f.simCorrupt, "sim-corrupt", "", "a simulated GPU that computes wrong answers: its burn and BF16 GEMM results mismatch (GPU index)")
	fl.StringVar(&f.simThrottle, "sim-throttle", "", "slow a simulated GPU with a clock-event reason while loaded: GPU[:REASON[:FROM[-TO]]] (e.g. 2:hw_slowdown)")
	fl.StringVar(&f.simRecoveryAction, "sim-recovery-action", "", "a simulated GPU whose driver asks for recovery (NVML's GPU recovery action): GPU:ACTION, ACTION reset, reboot, drain-p2p or drain-and-reset (e.g. 3:reset)")
	fl.StringVar(&f.simDriverFault, "sim-driver-fault", "", "play one of the driver's signals on a simulated GPU: GPU:KIND, KIND remap-pending, remap-failure, fabric, fallen-off-bus, requires-reset, rm-init or gsp-timeout (e.g. 1:fallen-off-bus)")
	fl.Float64Var(&r.LinkVariancePct, "link-variance-pct", def.LinkVariancePct, "pair-to-pair tolerance of the peer-copy ratio (%)")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop the checks after this long and judge what was measured (0: no limit; slurmd kills a HealthCheckProgram after 60 s)")
	f.nodes.register(fl)
	f.cf.register(cmd)
	return cmd
}

// Validate checks the flags before any GPU is touched.
func (f *healthOptions) Validate() error {
	o, r := f.opts, f.rules
	switch {
	case f.sim && f.xml != "":
		return usageErr("--sim and --nvidia-smi-xml exclude each other: pick one source")
	case o.ExpectGPUs < 0:
		return usageErr("--expect-gpus %d: want 0 (no check) or a positive count", o.ExpectGPUs)
	case r.ExpectPCIeWidth != 0 && !map[int]bool{1: true, 2: true, 4: true, 8: true, 16: true, 32: true}[r.ExpectPCIeWidth]:
		return usageErr("--expect-pcie-width %d: want 1, 2, 4, 8, 16 or 32 lanes", r.ExpectPCIeWidth)
	case o.Burn < 0:
		return usageErr("--burn %s: want a positive duration such as 60s", o.Burn)
	case o.DCGMLevel < 1 || o.DCGMLevel > 4:
		return usageErr("--dcgm-level %d: want 1, 2, 3 or 4", o.DCGMLevel)
	case o.DCGMTimeout <= 0:
		return usageErr("--dcgm-timeout %s: want a positive duration", o.DCGMTimeout)
	case r.MinPCIeGBps < 0 || r.GEMMVariancePct <= 0 || r.GEMMVariancePct >= 100 || r.PCIeVariancePct <= 0 || r.PCIeVariancePct >= 100:
		return usageErr("--min-pcie-gbps must be ≥ 0 and the variance percentages between 0 and 100")
	case f.sim && (f.simCount < 1 || f.simCount > 64):
		return usageErr("--sim-gpus %d: want 1 to 64", f.simCount)
	case r.MinLinkRatio < 0 || r.MinLinkRatio > 1 || r.LinkVariancePct <= 0 || r.LinkVariancePct >= 100:
		return usageErr("--min-link-ratio must be in [0, 1] (0: the datasheet floors) and --link-variance-pct between 0 and 100")
	case f.simCoTenant != "" && !f.sim:
		return usageErr("--sim-cotenant needs --sim")
	case (f.topoFile != "" || f.nvlinkFile != "") && f.xml == "":
		return usageErr("--nvidia-smi-topo and --nvidia-smi-nvlink go with --nvidia-smi-xml (on a live host NVML reads the links)")
	case f.simLinkFault != "" && !f.sim:
		return usageErr("--sim-link-fault needs --sim")
	case (f.simCorrupt != "" || f.simThrottle != "") && !f.sim:
		return usageErr("--sim-corrupt and --sim-throttle need --sim")
	case (f.simRecoveryAction != "" || f.simDriverFault != "") && !f.sim:
		return usageErr("--sim-recovery-action and --sim-driver-fault need --sim")
	}
	if f.out != "" {
		if err := checkReplaceable(f.out, f.xml, f.topoFile, f.nvlinkFile); err != nil {
			return usageErr("--out: %v", err)
		}
	}
	if f.sim {
		if _, _, err := sim.ParseRecoveryAction(f.simRecoveryAction, f.simCount); err != nil {
			return usageErr("--sim-recovery-action: %v", err)
		}
		if _, _, err := sim.ParseDriverFault(f.simDriverFault, f.simCount); err != nil {
			return usageErr("--sim-driver-fault: %v", err)
		}
	}
	return nil
}

// Complete reads the plan (-c, --set) into the options, under the flags given, then the --floor
// pairs, through the functions a run's health phase uses, so a Kubernetes node's health Job judges
// as the host pipeline would.
func (f *healthOptions) Complete(cmd *cobra.Command, _ []string) error {
	fl := cmd.Flags()
	if len(f.cf.files) > 0 || len(f.cf.sets) > 0 {
		plan, err := f.cf.plan()
		if err != nil {
			return err
		}
		// reference_floors keyed "H200" judge a GPU detected as "NVIDIA H200", as in a run.
		if err := pipeline.ResolveGPUNames(&plan.Config, catalog.Builtin()); err != nil {
			return usageErr("%v", err)
		}
		given := map[string]string{}
		fl.Visit(func(x *pflag.Flag) { given[x.Name] = x.Value.String() })
		f.opts, f.rules = health.FromConfig(plan.Config, ""), judge.HealthRulesFrom(plan.Config)
		// No plan key holds these: the flags' defaults, as the run's judge takes them.
		d := judge.DefaultHealthRules()
		f.rules.PCIeVariancePct, f.rules.LinkVariancePct = d.PCIeVariancePct, d.LinkVariancePct
		f.ncclLib = plan.Config.Health.NCCLLib
		for name, v := range given { // a flag given wins over the plan
			if name == "config" || name == "set" || name == "floor" { // lists, read once already
				continue
			}
			if err := fl.Set(name, v); err != nil {
				return usageErr("--%s: %v", name, err)
			}
		}
	}
	ov, err := parseFloors(f.floors)
	if err != nil {
		return err
	}
	f.rules.FloorOverrides = ov
	return nil
}

// Run opens the GPU source, runs health.Run, prints its tables, writes --out and exits by the status.
func (f *healthOptions) Run(cmd *cobra.Command) error {
	// Ctrl-C stops the benchmarks and the burn; what was measured is still printed and written.
	ctx, stop := interruptible(cmp.Or(cmd.Context(), context.Background()))
	defer stop()
	if err := f.nodes.each(func(h *nodeHealth) error { return h.preflight(ctx) }); err != nil {
		return err
	}
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}

	f.opts.Catalog = catalog.Builtin()
	src, bench, err := openHealthSource(f)
	if err != nil {
		return err
	}
	defer src.Close()
	if c, ok := bench.(interface{ Close() error }); ok {
		defer c.Close()
	}
	if c, ok := f.opts.Links.(interface{ Close() error }); ok {
		defer c.Close()
	}
	f.opts.Progress = cmd.ErrOrStderr()
	h := health.Run(ctx, src, bench, f.opts)
	judge.Health(h, f.rules) // health measures, judge decides
	term.Health(cmd.OutOrStdout(), h)
	cut := ctx.Err() != nil
	if err := f.nodes.each(func(n *nodeHealth) error { return n.act(context.WithoutCancel(ctx), cmd, h, cut) }); err != nil {
		return err
	}
	if f.out != "" {
		if err := results.WriteJSON(f.out, h); err != nil {
			return failedErr("writing --out: %v (the result is printed above)", err)
		}
	}
	switch {
	case h.Status == results.StatusFailed:
		return failedErr("health: failed (see the errors above)")
	case h.Status == results.StatusFlag && f.failOnFlag:
		return failedErr("health: flagged, and --fail-on-flag is set")
	}
	return nil
}

// openHealthSource picks the inventory source and the benchmark runner from the flags.
func openHealthSource(f *healthOptions) (gpu.Source, health.BenchRunner, error) {
	switch {
	case f.xml != "":
		f.opts.Source = "nvidia-smi-xml"
		src, err := gpu.FromNvidiaSMIXML(f.xml, f.opts.Catalog)
		if err != nil {
			return nil, nil, usageErr("%v", err)
		}
		if f.topoFile != "" || f.nvlinkFile != "" {
			ic, err := gpu.FromLinkCaptures(f.topoFile, f.nvlinkFile)
			if err != nil {
				return nil, nil, usageErr("%v", err)
			}
			src = gpu.WithLinks(src, ic)
		}
		return src, nil, nil
	case f.sim:
		f.opts.Source = "sim"
		return openSim(f)
	}
	f.opts.Source = "nvml"
	src, err := gpu.OpenNVML()
	if errors.Is(err, gpu.ErrNoDriver) {
		return nil, nil, usageErr("%v: run on a GPU host, or use --sim or --nvidia-smi-xml FILE", err)
	}
	if err != nil {
		return nil, nil, failedErr("%v", err)
	}
	if f.opts.SkipBench && f.opts.Burn == 0 {
		return src, nil, nil
	}
	f.opts.Links = openPeer(f.ncclLib)
	r, err := cuda.Open()
	if err != nil {
		return src, health.Unavailable{Err: err}, nil
	}
	return src, r, nil
}

// simFlagErr names the flag behind a simulated fleet's field error ("gpu: …" is --sim-gpu).
func simFlagErr(err error) string {
	for field, flag := range map[string]string{"gpu": "--sim-gpu", "count": "--sim-gpus", "straggler index": "--sim-straggler", "straggler pct": "--sim-straggler-pct"} {
		if rest, ok := strings.CutPrefix(err.Error(), field+": "); ok {
			return flag + ": " + rest
		}
	}
	return "--sim: " + err.Error()
}

// openSim builds the simulator's virtual host: its Fleet is the source and, through
// health.SimBench, the benchmark runner.
func openSim(f *healthOptions) (gpu.Source, health.BenchRunner, error) {
	fleet, err := sim.NewFleet(sim.FleetConfig{GPU: f.simGPU, Count: f.simCount, StragglerIndex: f.simStraggler, StragglerPct: f.simStragglerPct, NodeSlowdownPct: f.simNodeSlowdownPct, Seed: 1, LinkFault: f.simLinkFault, CoTenant: f.simCoTenant,
		Corrupt: f.simCorrupt, Throttle: f.simThrottle, RecoveryAction: f.simRecoveryAction, DriverFault: f.simDriverFault, Catalog: f.opts.Catalog})
	if err != nil {
		return nil, nil, usageErr("%v", simFlagErr(err))
	}
	f.opts.Links = health.SimLinks{Fleet: fleet}
	return fleet, health.SimBench{Fleet: fleet}, nil
}

// openPeer opens the GPU-to-GPU runner; where the CUDA driver does not load, every pair says why.
func openPeer(ncclLib string) health.LinkRunner {
	p, err := cuda.OpenPeer()
	if err != nil {
		return health.UnavailableLinks{Err: err}
	}
	p.NCCLLib = ncclLib
	return p
}

// floorNames are the names --floor and reference_floors accept.
func floorNames() []string {
	return append(results.MicrobenchNames(), results.FloorBurn, results.FloorPeerCopy, results.FloorAllReduce)
}

// parseFloors reads --floor NAME=RATIO pairs; a bad one is a usage error naming it.
func parseFloors(in map[string]string) (map[string]float64, error) {
	if len(in) == 0 {
		return nil, nil
	}
	out := map[string]float64{}
	for k, v := range in {
		if !slices.Contains(floorNames(), k) {
			return nil, usageErr("--floor %s: unknown benchmark; want one of %s", k, strings.Join(floorNames(), ", "))
		}
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || r > 1.5 {
			return nil, usageErr("--floor %s=%s: want a share of the datasheet peak between 0 and 1.5 (0 turns the floor off), e.g. %s=0.6", k, v, k)
		}
		out[k] = r
	}
	return out, nil
}
