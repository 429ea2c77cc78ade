// Package config is gpuvet's one configuration schema and its resolution into a Plan.
//
// Values come from, lowest to highest precedence: built-in defaults, environment variables
// (GPUVET_<PATH>, e.g. GPUVET_LOAD_MAX_CONCURRENCY), YAML files in order (-c a.yaml -c b.yaml; maps
// merge recursively, lists replace; an aicr recipe given as a file contributes its
// validation.performance.constraints), and --set key=value. Every resolved value records its source,
// so `gpuvet config show` and summary.json can say who decided each threshold.
package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/results"
)

// Config is the whole schema. Field comments are the documentation of each key (docs/config.md has
// a commented full example).
type Config struct {
	// Backend decides where engines run: local (this host), endpoint (a running OpenAI-compatible
	// server), sim (in-process simulator), ssh, opennebula (VMs with GPU passthrough), kubernetes.
	Backend string `yaml:"backend"`
	// Environment labels the run for comparisons: baremetal, vm, k8s, or anything.
	Environment string `yaml:"environment"`
	// Models are served one after another on every selected GPU (exact Hugging Face ids).
	Models     []string             `yaml:"models"`
	Engine     Engine               `yaml:"engine"`
	Endpoint   Endpoint             `yaml:"endpoint"`
	Load       LoadProfile          `yaml:"load"`
	Gates      Gates                `yaml:"gates"`
	Compare    Compare              `yaml:"compare"`
	Reference  map[string]ModelRefs `yaml:"reference"`
	Health     Health               `yaml:"health"`
	Functional Functional           `yaml:"functional"`
	Power      Power                `yaml:"power"`
	Output     Output               `yaml:"output"`
	ModelCache ModelCache           `yaml:"model_cache"`
	Run        Run                  `yaml:"run"`
	Sim        Sim                  `yaml:"sim"`
	History    History              `yaml:"history"` // docs/history.md
	SSH        SSH                  `yaml:"ssh"`
	OpenNebula OpenNebula           `yaml:"opennebula"`
	Kubernetes Kubernetes           `yaml:"kubernetes"`
	Slurm      Slurm                `yaml:"slurm"`
	// HostPrep installs what an ssh host lacks (driver, DCGM, numactl) and purges it after.
	HostPrep     HostPrep               `yaml:"host_prep"`
	Accelerators map[string]Accelerator `yaml:"accelerators"`
	// ReferenceFloors: exact GPU name -> benchmark (sgemm_fp32, gemm_tf32, gemm_bf16, pcie_h2d,
	// pcie_d2h, hbm_d2d, burn, peer_copy, all_reduce) -> the least share of the datasheet peak a
	// healthy card measures (0: off). Unnamed benchmarks keep the built-in floor
	// (docs/health-floors.md); `gpuvet calibrate` writes this table.
	ReferenceFloors map[string]map[string]float64 `yaml:"reference_floors"`
}

// Engine says how a serving engine is launched per GPU (or per tp group).
type Engine struct {
	// Kind: vllm, sglang, trtllm, transformers (built-in templates) or generic (Command below).
	Kind string `yaml:"kind"`
	// Command is the launch template (kind generic, or overriding a built-in one); placeholders
	// {model} {port} {gpu} {tp} {max_model_len} {gpu_memory_utilization} {front}.
	Command string `yaml:"command"`
	// ExtraArgs are appended to the launch command line.
	ExtraArgs []string `yaml:"extra_args"`
	// VersionCommand prints the engine version (recorded); empty: the kind's default.
	VersionCommand string `yaml:"version_command"`
	// Version pins the expected engine version; a different reported version is flagged.
	Version              string   `yaml:"version"`
	TP                   int      `yaml:"tp"`
	MaxModelLen          int      `yaml:"max_model_len"`
	GPUMemoryUtilization float64  `yaml:"gpu_memory_utilization"`
	PortBase             int      `yaml:"port_base"` // engine i listens on port_base + i
	ReadyTimeout         Duration `yaml:"ready_timeout"`
	// NUMABind runs engine and load under numactl bound to the GPU's NUMA node when known.
	NUMABind bool `yaml:"numa_bind"`
	// Env is extra, non-secret environment for the engine. Secrets: see TokenEnv.
	Env map[string]string `yaml:"env"`
	// TokenEnv names the environment variable holding the hub token (passed through, never logged).
	TokenEnv string `yaml:"token_env"`
}

// Endpoint is the already-running server for backend endpoint.
type Endpoint struct {
	URL string `yaml:"url"`
	// APIKeyEnv names the environment variable holding the API key (never the key itself).
	APIKeyEnv string `yaml:"api_key_env"`
	// Health runs the health phase on this host too (default: no).
	Health bool `yaml:"health"`
	// SameHost: the server runs on this machine (a Kubernetes load Job's engine), so the host's CPU
	// pressure over each rung is the contention it met.
	SameHost bool `yaml:"same_host"`
}

// LoadProfile is the load profile (the seed's shared guidellm profile by default).
type LoadProfile struct {
	Profile        string   `yaml:"profile"` // sweep, synchronous, concurrency, constant, poisson, throughput
	API            string   `yaml:"api"`     // chat or completions
	PromptTokens   int      `yaml:"prompt_tokens"`
	OutputTokens   int      `yaml:"output_tokens"`
	MaxConcurrency int      `yaml:"max_concurrency"`
	Concurrency    int      `yaml:"concurrency"` // for profile concurrency (aicr: per GPU)
	Rate           float64  `yaml:"rate"`        // for constant and poisson
	Rates          int      `yaml:"rates"`       // constant rungs of a sweep
	MaxDuration    Duration `yaml:"max_duration"`
	// MaxRungDuration caps a rung that runs past max_duration until compare.min_samples requests
	// completed (synchronous, concurrency), and a sweep rung waiting for its steady state (one that
	// never levels by then is transient).
	MaxRungDuration Duration `yaml:"max_rung_duration"`
	// TimeBudget is what a sweep plans its rungs against, per GPU (endpoint): fewer constant
	// rates, no further probe, no climb or rerun when their planned lengths would pass it.
	TimeBudget       Duration `yaml:"time_budget"`
	Warmup           string   `yaml:"warmup"` // "1" (requests) or "5s"
	RetryUnsaturated bool     `yaml:"retry_unsaturated"`
	Seed             int64    `yaml:"seed"`
	// Reader reads streamed responses: auto (an event loop for plain http on Linux, else net/http),
	// eventloop or nethttp.
	Reader string `yaml:"reader"`
	// Workload is what the prompts are (docs/workloads.md): synthetic; shared-prefix (prefix_count
	// groups sharing prefix_tokens; 0: defaults); trace (the Mooncake JSONL at trace, replayed
	// trace_speed times as fast); multi-turn (sessions carrying their history); long-context (a
	// ladder of context lengths up to context_max).
	Workload     string  `yaml:"workload"`
	PrefixCount  int     `yaml:"prefix_count"`
	PrefixTokens int     `yaml:"prefix_tokens"`
	Trace        string  `yaml:"trace"`
	TraceSpeed   float64 `yaml:"trace_speed"`
	Turns        int     `yaml:"turns"`       // multi-turn: turns per session (0: the load's default)
	ContextMax   int     `yaml:"context_max"` // long-context: the ladder's top (0: the server's max_model_len)
}

// Gates are the absolute SLO gates; null disables one.
type Gates struct {
	TTFTP95Ms         *float64 `yaml:"ttft_p95_ms"`
	ITLP95Ms          *float64 `yaml:"itl_p95_ms"`
	MinThroughputReqS *float64 `yaml:"min_throughput_req_s"`
	AICRMinOutputTokS *float64 `yaml:"aicr_min_output_tok_s"`
	AICRMaxTTFTP99Ms  *float64 `yaml:"aicr_max_ttft_p99_ms"`
	AICRTolerancePct  float64  `yaml:"aicr_tolerance_pct"`
	// MaxErrorRatePct: more failed requests than this % fails the endpoint (bench exits 1); any
	// failed request flags. null: errors only flag.
	MaxErrorRatePct *float64 `yaml:"max_error_rate_pct"`
	// AICRThroughputScope: node (the recipe's floor is for the whole node, as aicr writes it) or gpu.
	AICRThroughputScope string `yaml:"aicr_throughput_scope"`
}

// ModelRefs is the reference table of one GPU name: exact model id -> partial gates.
type ModelRefs map[string]RefGates

// RefGates is a partial override of the gates for one GPU name × model id.
type RefGates struct {
	TTFTP95Ms         *float64 `yaml:"ttft_p95_ms"`
	ITLP95Ms          *float64 `yaml:"itl_p95_ms"`
	MinThroughputReqS *float64 `yaml:"min_throughput_req_s"`
}

// Compare holds the GPU-to-GPU and baseline comparison rules and their noise guards.
type Compare struct {
	VariancePct         float64 `yaml:"variance_pct"`
	GEMMVariancePct     float64 `yaml:"gemm_variance_pct"`
	MinSamples          int     `yaml:"min_samples"`
	MinThroughputReqS   float64 `yaml:"min_throughput_req_s"`
	MinTTFTDeltaMs      float64 `yaml:"min_ttft_delta_ms"`
	BaselineTolerancePc float64 `yaml:"baseline_tolerance_pct"`
}

// Health is the health phase.
type Health struct {
	Enabled    bool `yaml:"enabled"`
	ExpectGPUs int  `yaml:"expect_gpus"` // 0: no count check
	// Source: auto (NVML, then nvidia-smi), nvml, or a path to a captured `nvidia-smi -q -x`.
	Source            string   `yaml:"source"`
	GEMM              bool     `yaml:"gemm"`
	PCIe              bool     `yaml:"pcie"`
	PCIeMinGBs        float64  `yaml:"pcie_min_gbs"`
	PCIeExpectedWidth int      `yaml:"pcie_expected_width"` // 0: strict current-vs-max
	Burn              Duration `yaml:"burn"`                // 0: no burn
	DCGM              DCGM     `yaml:"dcgm"`
	// NCCLLib is the libnccl.so.2 for the all-reduce; "": the library path, then Python environments.
	NCCLLib string `yaml:"nccl_lib"`
	// AllowBusy measures and notes a GPU another process uses (or that is not idle) instead of
	// flagging it and marking its figures so they pass nothing.
	AllowBusy bool `yaml:"allow_busy"`
}

// DCGM is `dcgmi diag`.
type DCGM struct {
	Enabled bool     `yaml:"enabled"`
	Level   int      `yaml:"level"`
	Timeout Duration `yaml:"timeout"`
	// AllowInstall lets host_prep install DCGM where dcgmi is missing (purged after); false skips it.
	AllowInstall bool `yaml:"allow_install"`
}

// Functional is the API conformance suite.
type Functional struct {
	Enabled bool     `yaml:"enabled"`
	Timeout Duration `yaml:"timeout"` // per request
}

// Power is NVML sampling during load.
type Power struct {
	Enabled  bool     `yaml:"enabled"`
	Interval Duration `yaml:"interval"`
}

// Output says what is written where.
type Output struct {
	Dir        string `yaml:"dir"`
	HTML       bool   `yaml:"html"`
	JUnit      bool   `yaml:"junit"`
	Prometheus bool   `yaml:"prometheus"`
	// PrometheusFile is one more path the Prometheus textfile is written to atomically, e.g. node
	// exporter's textfile directory (docs/kubernetes.md); "": none.
	PrometheusFile string `yaml:"prometheus_file"`
}

// ModelCache is the local weights cache (HF_HOME) with the hub offline. In YAML, `model_cache: off`
// is short for `model_cache: {dir: off}`.
type ModelCache struct {
	// Dir is the hub cache folder (models--org--name): auto (the hub's default for vllm, sglang,
	// trtllm; none for generic), off (or empty): no managed cache, or a path (modelcache.Dir).
	Dir     string `yaml:"dir"`
	Offline bool   `yaml:"offline"`
	// Size is the cache volume's size on backend kubernetes (a PVC), e.g. 100Gi; off: no volume.
	Size string `yaml:"size"`
	// AccessMode of the cache PVC on backend kubernetes: auto (ReadWriteMany, one volume for every
	// node, where the provisioner is known to support it; else ReadWriteOnce), or either mode.
	AccessMode string `yaml:"access_mode"`
	// Endpoint is the hub the cache is filled from (a Hugging Face-compatible mirror; kubernetes
	// passes it to its populate Jobs as HF_ENDPOINT). "": $HF_ENDPOINT, else https://huggingface.co.
	Endpoint string `yaml:"endpoint"`
}

// IsOff reports whether a model_cache.dir value disables the managed cache.
func IsOff(dir string) bool { return dir == "" || dir == "off" }

// Run holds the knobs of the run itself.
type Run struct {
	// ParallelGPUs is how many GPUs are loaded at once: auto (as many as gpuvet's free CPU can load
	// without becoming the bottleneck: pipeline.ChooseParallel) or a number (1: one at a time).
	ParallelGPUs GPUsAtOnce `yaml:"parallel_gpus"`
	GPUCount     int        `yaml:"gpu_count"` // 0: all discovered GPUs
	FailOnFlag   bool       `yaml:"fail_on_flag"`
	// FailOnInconclusive exits 1 when the run is inconclusive (a gate or comparison could not decide).
	FailOnInconclusive bool `yaml:"fail_on_inconclusive"`
	// Acceptance is the gates' exit codes (docs/acceptance.md): 0 only ok, 1 flag or failed, 3
	// inconclusive (2 stays bad input); it overrides fail_on_flag and fail_on_inconclusive.
	Acceptance bool `yaml:"acceptance"`
	// FailIn injects a failure in one phase (Phases) to prove cleanup and reporting survive it.
	FailIn       string `yaml:"fail_in"`
	SaveBaseline bool   `yaml:"save_baseline"`
	Baseline     string `yaml:"baseline"` // baseline.json to compare against
}

// Sim configures the simulator backend (and `gpuvet sim` launched as an engine).
type Sim struct {
	GPUs      int    `yaml:"gpus"`
	GPU       string `yaml:"gpu"` // catalog name, e.g. H200
	Straggler int    `yaml:"straggler"`
	// StragglerPct is how much slower the straggler is.
	StragglerPct float64 `yaml:"straggler_pct"`
	Seed         int64   `yaml:"seed"`
	// LinkFault injects an NVLink fault on one GPU: "GPU[:down|slow|errors]"; "": none.
	LinkFault string `yaml:"link_fault"`
	// CoTenant puts another process on one virtual GPU for part of the run: "GPU[:FROM[-TO]]" (Go
	// durations), e.g. "1:5s-20s"; the GPU is then slower, lists PID 4242 python3 with 8.1 GiB,
	// and draws power at idle. "": none.
	CoTenant string `yaml:"cotenant"`
	// Corrupt makes one virtual GPU compute wrong answers (burn and BF16 GEMM mismatch, greedy
	// outputs drift). "GPU", "": none.
	Corrupt string `yaml:"corrupt"`
	// Throttle slows one loaded virtual GPU with a clock-event reason: "GPU[:REASON[:FROM[-TO]]]"
	// (REASON hw_slowdown, sw_thermal_slowdown, hw_thermal_slowdown or hw_power_brake_slowdown),
	// e.g. "2:hw_slowdown:20s". "": none.
	Throttle string `yaml:"throttle"`
	// EngineFault makes one virtual GPU's engine misbehave, the GPU healthy: "GPU:KIND", KIND short
	// (short outputs despite ignore_eos), cut (streams cut without a finish reason), traceback (HTTP
	// 500 with a traceback) or exit, e.g. "1:short"; that GPU is left inconclusive. "": none.
	EngineFault string `yaml:"engine_fault"`
	// RecoveryAction shows NVML's GPU recovery action on one virtual GPU: "GPU:ACTION", ACTION
	// reset, reboot, drain-p2p or drain-and-reset, e.g. "3:reset". "": none.
	RecoveryAction string `yaml:"recovery_action"`
	// DriverFault plays one of the driver's other signals on one virtual GPU: "GPU:KIND", KIND
	// remap-pending, remap-failure, fabric (its inventory shows it), fallen-off-bus, requires-reset,
	// rm-init or gsp-timeout (its kernel log holds the driver's line), e.g. "1:fallen-off-bus". "": none.
	DriverFault string `yaml:"driver_fault"`
	// HBMHidden hides part of one virtual GPU's memory from its engine (retired pages, a slice,
	// another process): "GPU[:SHARE]", SHARE in (0, 1), default 0.5, e.g. "1" or "1:0.25". Its KV
	// cache is smaller: a long-context ladder finds it preempting before its siblings. "": none.
	HBMHidden string `yaml:"hbm_hidden"`
	// A slow engine: StepOverhead and SeqOverhead add engine time to every step (fixed, and per
	// sequence in the batch), as a scheduler-bound engine spends it (transformers on an 8B: about
	// 40ms and 2ms); MaxNumSeqs is the engine's batch limit (0: vLLM's 256).
	StepOverhead Duration `yaml:"step_overhead"`
	SeqOverhead  Duration `yaml:"seq_overhead"`
	MaxNumSeqs   int      `yaml:"max_num_seqs"`
	// BenchTime is how long each simulated microbenchmark and peer copy takes (0: no time), so a
	// simulated health phase shows one GPU at a time against all at once.
	BenchTime Duration `yaml:"bench_time"`
	// NodeSlowdownPct slows every virtual GPU by this share (5: 0.95 of a healthy one): a node that
	// ages as a whole, which only the history sees, never a GPU-to-GPU comparison.
	NodeSlowdownPct float64 `yaml:"node_slowdown_pct"`
	// EngineDriftPct makes every simulated engine's speed wander over seconds between 1 and
	// 1 − EngineDriftPct/100 of its own (GPUs unchanged): a CPU-bound engine's drift, which a
	// repeatable interval must cover. 0: none.
	EngineDriftPct float64 `yaml:"engine_drift_pct"`
}

// History is the run history (docs/history.md): where runs are kept and how a node is compared
// with its own acceptance run.
type History struct {
	// Enabled records every run and compares it with its acceptance (default true: SQLite costs
	// nothing to set up, and a history that starts late has no acceptance).
	Enabled bool `yaml:"enabled"`
	// URL is the store: "" (SQLite under gpuvet's state directory), sqlite:///path/history.db, or
	// postgres://user@host:port/db?sslmode=...; a password in it is refused (PasswordEnv).
	URL string `yaml:"url"`
	// PasswordEnv names the variable holding the PostgreSQL password (never in argv or output).
	PasswordEnv string `yaml:"password_env"`
	// RetentionDays drops runs older than this many days when a run is recorded (0: keep all);
	// pinned and acceptance runs are kept.
	RetentionDays int `yaml:"retention_days"`
	// DriftPct: a figure worse than its acceptance by more than this, the gap's interval beyond it
	// too, flags (docs/history.md: why it is tighter than compare.variance_pct).
	DriftPct float64 `yaml:"drift_pct"`
	// Timeout bounds each read and write of the store.
	Timeout Duration `yaml:"timeout"`
}

// Accelerator overrides these parts of the plan for the GPUs its key names (maps merge, lists
// replace), so one recipe serves a mixed fleet.
type Accelerator struct {
	Models []string    `yaml:"models"`
	Engine Engine      `yaml:"engine"`
	Load   LoadProfile `yaml:"load"`
	Gates  Gates       `yaml:"gates"`
}

// Duration is a time.Duration written as a Go duration string ("20s") in YAML.
type Duration time.Duration

// GPUsAtOnce is run.parallel_gpus: a count ≥ 1, or AutoGPUs (written "auto").
type GPUsAtOnce int

// AutoGPUs is run.parallel_gpus: auto, the run decides (its zero value, so the default).
const AutoGPUs GPUsAtOnce = 0

// Auto says the run chooses how many GPUs it loads at once.
func (n GPUsAtOnce) Auto() bool { return n == AutoGPUs }

func (n GPUsAtOnce) String() string {
	if n.Auto() {
		return "auto"
	}
	return strconv.Itoa(int(n))
}

// MarshalYAML writes auto or the count.
func (n GPUsAtOnce) MarshalYAML() (any, error) {
	if n.Auto() {
		return "auto", nil
	}
	return int(n), nil
}

// UnmarshalYAML reads auto or a count ≥ 1.
func (n *GPUsAtOnce) UnmarshalYAML(unmarshal func(any) error) error {
	return unmarshalText(unmarshal, n, parseGPUsAtOnce)
}

// unmarshalText sets *dst to a YAML value read as text and parsed by parse.
func unmarshalText[T any](unmarshal func(any) error, dst *T, parse func(string) (T, error)) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return err
	}
	v, err := parse(s)
	if err == nil {
		*dst = v
	}
	return err
}

func parseGPUsAtOnce(s string) (GPUsAtOnce, error) {
	if strings.EqualFold(strings.TrimSpace(s), "auto") {
		return AutoGPUs, nil
	}
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 1 {
		return 0, fmt.Errorf("want auto or a GPU count ≥ 1, got %q", s)
	}
	return GPUsAtOnce(v), nil
}

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes "20s".
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// UnmarshalYAML reads "20s" (a bare 0 is allowed).
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	return unmarshalText(unmarshal, d, func(s string) (Duration, error) {
		v, err := parseDuration(s)
		return Duration(v), err
	})
}

func parseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration like \"20s\" or \"5m\", got %q", s)
	}
	return v, nil
}

func f(v float64) *float64 { return &v }

// loadDefaults is the shared profile (results.DefaultLoadConfig, as the load generator and `gpuvet
// bench` read it) plus what only a plan has.
func loadDefaults() LoadProfile {
	d := results.DefaultLoadConfig()
	return LoadProfile{
		Profile: d.Profile, API: d.API, PromptTokens: d.PromptTokens, OutputTokens: d.OutputTokens,
		MaxConcurrency: d.MaxConcurrency, Concurrency: d.Concurrency, Rates: d.Rates,
		MaxDuration: Duration(d.MaxDuration), Warmup: d.Warmup, Seed: d.Seed, Reader: d.Reader,
		MaxRungDuration: Duration(d.MaxRungDuration), TimeBudget: Duration(d.TimeBudget), RetryUnsaturated: true,
		Workload: d.Workload, TraceSpeed: d.TraceSpeed,
	}
}

// Defaults are the built-in values (from the seeds).
func Defaults() Config {
	hd, sd, th := results.DefaultHealth(), results.DefaultSim(), results.DefaultOf
	return Config{
		Backend:     "local",
		Environment: "baremetal",
		Models:      []string{"Qwen/Qwen3-8B"},
		Engine: Engine{
			Kind: "vllm", TP: 1, MaxModelLen: 1024, GPUMemoryUtilization: 0.9, PortBase: 8000,
			ReadyTimeout: Duration(20 * time.Minute), NUMABind: true, TokenEnv: "HF_TOKEN",
		},
		Load: loadDefaults(),
		Gates: Gates{TTFTP95Ms: f(th(results.ThTTFTP95Ms)), ITLP95Ms: f(th(results.ThITLP95Ms)), AICRTolerancePct: th(results.ThAICRTolerancePct),
			AICRThroughputScope: "node", MaxErrorRatePct: f(th(results.ThMaxErrorRatePct))},
		Compare: Compare{
			VariancePct: th(results.ThLLMVariancePct), GEMMVariancePct: th(results.ThGEMMVariancePct), MinSamples: int(th(results.ThMinSamples)),
			MinThroughputReqS: th(results.ThCompareMinReqS), MinTTFTDeltaMs: th(results.ThMinTTFTDeltaMs), BaselineTolerancePc: th(results.ThBaselineTolerance),
		},
		Health: Health{
			Enabled: true, Source: "auto", GEMM: true, PCIe: true, PCIeMinGBs: th(results.ThPCIeMinGBps),
			DCGM: DCGM{Enabled: true, Level: hd.DCGMLevel, Timeout: Duration(hd.DCGMTimeout), AllowInstall: true},
		},
		Functional: Functional{Enabled: true, Timeout: Duration(60 * time.Second)},
		Power:      Power{Enabled: true, Interval: Duration(time.Second)},
		Output:     Output{Dir: "out", HTML: true, JUnit: true},
		ModelCache: ModelCache{Dir: "auto", Offline: true, Size: "100Gi", AccessMode: AccessAuto},
		Run:        Run{ParallelGPUs: AutoGPUs},
		Sim:        Sim{GPUs: sd.GPUs, GPU: sd.GPU, Straggler: -1, StragglerPct: sd.StragglerPct, Seed: sd.Seed},
		SSH:        sshDefaults(),
		OpenNebula: openNebulaDefaults(),
		Kubernetes: kubernetesDefaults(),
		Slurm:      slurmDefaults(),
		HostPrep:   hostPrepDefaults(),
		History:    historyDefaults(),
	}
}

// historyDefaults is the history section's one home of defaults.
func historyDefaults() History {
	return History{Enabled: true, PasswordEnv: "PGPASSWORD", RetentionDays: 365, DriftPct: results.DefaultOf(results.ThDriftPct), Timeout: Duration(30 * time.Second)}
}

// SimQuickMaxNumSeqs is the simulated engine's batch limit under the simulator's quick profile: the
// batch its max concurrency fills, its knee.
const SimQuickMaxNumSeqs = 32

// simDefaults replace built-in defaults (only those) when the backend is sim, so the README's first
// command finishes in about two minutes on a small machine. Source "default(sim)", and a caveat;
// the full profile needs all five load keys set.
var simDefaults = map[string]any{
	"load.max_duration":    "4s",
	"load.rates":           4,
	"load.max_concurrency": 32,
	"load.prompt_tokens":   256,
	"load.output_tokens":   128,
	"sim.max_num_seqs":     SimQuickMaxNumSeqs,
	"health.burn":          "0s",
}
