package pipeline

import (
	"context"
	"time"

	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/results"
)

// Source is where GPUs are found and sampled (gpu.Source's shape: NVML, nvidia-smi XML, sim.Fleet).
type Source interface {
	GPUs() ([]results.GPUInfo, error)
	// Sample reads GPU i's power, clocks and temperature now.
	Sample(i int) (results.PowerSample, error)
	Close() error
}

// Described is a Source with a note for the discovery record: what it saw and how (a Kubernetes
// node: its free GPUs and product label, seen through the API).
type Described interface {
	Note() string
}

// Unsampled is a Source whose loaded GPUs this process cannot read (a Kubernetes node from outside):
// the load runs unsampled, and the endpoint's telemetry says why.
type Unsampled interface {
	Unsampled() string
}

// Slot is one engine's share of the host: one GPU, or one group of tp GPUs.
type Slot struct {
	Index    int   // 0.. in launch order
	GPUs     []int // GPU indexes
	GPUName  string
	NUMANode int // of the first GPU; -1 unknown
}

// Served is a running endpoint: an engine process, an in-process simulator, or a given URL.
type Served struct {
	URL string
	// APIKeyEnv names the environment variable holding the API key (the key itself is never stored).
	APIKeyEnv string
	Engine    results.EngineInfo
	Binding   string
	LogFile   string // relative to the output directory
	Provision time.Duration
	Stop      func()
	// LogTail returns the end of the engine log (redacted); nil when there is no log.
	LogTail func() string
	// Exited says how the engine process ended ("exit status 1"), "" while it runs; nil when the
	// backend cannot tell (an endpoint it did not start).
	Exited func() string
	// PID is the engine's process on this host, for its CPU wait; 0 when not a process of this host.
	PID int
	// SharesHost: the engine runs on this machine, not as its process (a pod of this node), so the
	// host's CPU pressure is the contention it met.
	SharesHost bool
}

// Backend decides where engines run and how gpuvet reaches them.
type Backend interface {
	Name() string // "local", "endpoint", "sim"
	// Serve starts model on slot and returns when a real completion came back (or fails; a failed
	// start leaves nothing running). outDir is the run's output directory (for logs).
	Serve(ctx context.Context, slot Slot, model string, cfg config.Config, outDir string) (*Served, error)
	// EngineVersion is the engine version to record ("" unknown, with the reason in err).
	EngineVersion(ctx context.Context, cfg config.Config) (string, error)
}

// Grouper is a Backend that makes its own engines of the GPUs the run may use, instead of TPSlots
// (the endpoint backend's one server, Kubernetes with Dynamo's one deployment).
type Grouper interface {
	Group(gpus []results.GPUInfo, tp int) ([]Slot, string)
}

// Deps are the phases the pipeline calls, each a plain function, so a missing one is one field.
type Deps struct {
	// Discover opens the GPU source for the plan and names it ("nvml", "nvidia-smi-xml", "sim");
	// a nil source with a nil error means no GPUs (e.g. backend endpoint).
	Discover func(ctx context.Context, cfg config.Config) (Source, string, error)
	// Health runs the health phase over the source's GPUs (name as Discover gave it).
	Health  func(ctx context.Context, src Source, name string, cfg config.Config) *results.Health
	Backend Backend
	// Load runs one load profile against one endpoint; recordsPath receives the raw per-request
	// records ("" none).
	Load func(ctx context.Context, url, model, apiKeyEnv string, lc results.LoadConfig, recordsPath string) (*results.Load, error)
	// Warmup warms the engine up before the load (nil: none; a Kubernetes load Job does it itself).
	Warmup func(ctx context.Context, url, model, apiKeyEnv string) error
	// Functional runs the API conformance suite against one endpoint (nil, or a nil result: not run).
	Functional func(ctx context.Context, url, model, apiKeyEnv string, cfg config.Config) *results.Functional
	// Judge applies gates, the reference table and GPU-to-GPU comparisons to the summary.
	Judge func(s *results.Summary, plan *config.Plan) error
	// History reads the acceptance runs before the judge (history.Session.Prepare), Record appends
	// the judged run (Session.Record, closing the store); nil: no history. Errors are caveats only.
	History func(ctx context.Context, s *results.Summary, plan *config.Plan)
	Record  func(ctx context.Context, s *results.Summary, plan *config.Plan)
	// Baseline compares the summary against a baseline file.
	Baseline func(s *results.Summary, baselinePath string, plan *config.Plan) error
	// Report writes the human and machine reports next to summary.json.
	Report func(s *results.Summary, dir string, out config.Output) error
	// CacheEnv prepares the model cache for an engine kind and returns the engine environment for it
	// (modelcache.CacheEnv).
	CacheEnv func(ctx context.Context, model, engineKind string, mc config.ModelCache) (map[string]string, error)
	// ExitCode maps a finished summary to the process exit code.
	ExitCode func(s *results.Summary, failOnFlag, failOnInconclusive bool) int
	// Catalog gives the GPU and model figures the run is set against (nil: the built-in catalog).
	Catalog *catalog.Catalog
	// Cores is the CPU where the load client runs, and its source, for run.parallel_gpus auto (nil:
	// this process's affinity mask and cgroup quota).
	Cores func() (float64, string)
}
