package results

import "time"

// DefaultLoadConfig is the load profile used where nothing says otherwise (the seed's guidellm
// profile): the one home of these values for config, the load generator and `gpuvet bench`. Here
// because config and load both import it and neither can import the other; a function, so no caller
// can change another's defaults.
func DefaultLoadConfig() LoadConfig {
	return LoadConfig{
		Profile: "sweep", API: "chat", PromptTokens: 512, OutputTokens: 256,
		MaxConcurrency: 128, Concurrency: 256, Rates: 10, MaxDuration: Duration(20 * time.Second),
		Warmup: "1", Data: "synthetic", Workload: "synthetic", TraceSpeed: 1, Seed: 42, Reader: "auto",
		MinSamples: 30, MaxRungDuration: Duration(3 * time.Minute), TimeBudget: Duration(8 * time.Minute),
	}
}

// LoadWorkloads are the workloads a load can send (LoadConfig.Workload; docs/workloads.md): the
// seed's synthetic prompts, prompts in groups sharing a prefix, a replayed request trace,
// conversations whose turns carry their history, and a ladder of context lengths.
func LoadWorkloads() []string {
	return []string{"synthetic", "shared-prefix", "trace", "multi-turn", "long-context"}
}

// MicrobenchNames are the health phase's microbenchmarks (Microbench.Name), in the order it runs
// them: the one list the CUDA runner, the simulator, the health phase and the reports read.
func MicrobenchNames() []string {
	return []string{"sgemm_fp32", "gemm_tf32", "gemm_bf16", "pcie_h2d", "pcie_d2h", "hbm_d2d"}
}

// MicrobenchFloors are the default datasheet floors: the least share of the GPU's datasheet peak a
// healthy card measures, per benchmark (MicrobenchNames, plus the burn's BF16 TFLOP/s, a pair's peer
// copy and the all-reduce bus bandwidth at its largest size); below it a figure is flagged. Each is
// the lowest ratio healthy H200s measured less FloorMarginPct, rounded down to 0.05
// (docs/health-floors.md): SGEMM 0.79, TF32 0.74, BF16 0.76, pinned PCIe 0.87, HBM copy 0.86, burn
// 0.68, peer copy 0.81, all-reduce 0.68 at 1 GiB. reference_floors overrides them per GPU name.
func MicrobenchFloors() map[string]float64 {
	return map[string]float64{
		"sgemm_fp32": 0.55, "gemm_tf32": 0.55, "gemm_bf16": 0.55,
		"pcie_h2d": 0.65, "pcie_d2h": 0.65, "hbm_d2d": 0.60,
		FloorBurn: 0.50, FloorPeerCopy: 0.60, FloorAllReduce: 0.50,
	}
}

// Floor names beside MicrobenchNames.
const (
	FloorBurn      = "burn"
	FloorPeerCopy  = "peer_copy"
	FloorAllReduce = "all_reduce"
)

// FloorMarginPct is how far below a healthy card's ratio a floor sits: the GPU-to-GPU tolerance of
// GEMM figures, so a card the comparison would flag beside a healthy sibling is flagged on its own.
const FloorMarginPct = 25.0

// HealthDefaults are the health phase's default settings (the one home of their values).
type HealthDefaults struct {
	MinPCIeGBps float64       // pinned PCIe bandwidth below this is flagged (GB/s)
	DCGMLevel   int           // dcgmi diag level
	DCGMTimeout time.Duration // bound on the whole dcgmi run
	// GPU-to-GPU tolerances (%) of the GEMMs, the PCIe copies and the peer-copy ratios.
	GEMMVariancePct, PCIeVariancePct, LinkVariancePct float64
}

// DefaultHealth returns the health phase's defaults.
func DefaultHealth() HealthDefaults {
	return HealthDefaults{MinPCIeGBps: DefaultOf(ThPCIeMinGBps), DCGMLevel: 2, DCGMTimeout: 15 * time.Minute,
		GEMMVariancePct: DefaultOf(ThGEMMVariancePct), PCIeVariancePct: DefaultOf(ThPCIeVariancePct), LinkVariancePct: DefaultOf(ThLinkVariancePct)}
}

// SimDefaults are the simulator's defaults: the virtual host `--sim` vets, and its straggler.
type SimDefaults struct {
	GPU          string  // catalog key
	GPUs         int     // virtual GPUs
	StragglerPct float64 // how much slower the straggler is (%)
	Seed         int64
}

// DefaultSim returns the simulator's defaults.
func DefaultSim() SimDefaults { return SimDefaults{GPU: "H200", GPUs: 4, StragglerPct: 30, Seed: 1} }
