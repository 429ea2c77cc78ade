package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/catalog"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/cuda"
	"github.com/gpuvet/gpuvet/internal/functional"
	"github.com/gpuvet/gpuvet/internal/gpu"
	"github.com/gpuvet/gpuvet/internal/health"
	"github.com/gpuvet/gpuvet/internal/history"
	"github.com/gpuvet/gpuvet/internal/importer"
	"github.com/gpuvet/gpuvet/internal/judge"
	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/modelcache"
	"github.com/gpuvet/gpuvet/internal/report"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/sim"
)

// simFleetConfig is the simulated host the plan's sim section describes.
func simFleetConfig(c config.Config, cat *catalog.Catalog) sim.FleetConfig {
	return sim.FleetConfig{GPU: c.Sim.GPU, Count: c.Sim.GPUs, StragglerIndex: c.Sim.Straggler,
		StragglerPct: c.Sim.StragglerPct, NodeSlowdownPct: c.Sim.NodeSlowdownPct, EngineDriftPct: c.Sim.EngineDriftPct, Seed: c.Sim.Seed, LinkFault: c.Sim.LinkFault, CoTenant: c.Sim.CoTenant,
		Corrupt: c.Sim.Corrupt, Throttle: c.Sim.Throttle, EngineFault: c.Sim.EngineFault, HBMHidden: c.Sim.HBMHidden,
		RecoveryAction: c.Sim.RecoveryAction, DriverFault: c.Sim.DriverFault, Catalog: cat}
}

// ErrNoGPUSource is a discovery failure that means "this host has no NVIDIA driver".
var ErrNoGPUSource = errors.New("no NVIDIA driver on this host")

// NewDeps wires the real phases for a plan; cat is the catalog they read (nil: the built-in one),
// progress receives their own progress lines (nil: quiet).
func NewDeps(cfg config.Config, cat *catalog.Catalog, progress io.Writer) Deps {
	var fleet *sim.Fleet
	hist := &history.Session{}
	d := Deps{
		Load: func(ctx context.Context, url, model, apiKeyEnv string, lc results.LoadConfig, records string) (*results.Load, error) {
			return load.Run(ctx, load.Options{URL: url, Model: model, APIKeyEnv: apiKeyEnv, Config: lc,
				CachedTokenizer: cachedTokenizer(cfg, model, progress),
				RecordsPath:     records, RetryUnsaturated: cfg.Load.RetryUnsaturated, ScrapeMetrics: true,
				Log: logFrom(ctx, progress), OnRung: rungFrom(ctx), OnPlan: planFrom(ctx), BeforeBlock: blockFrom(ctx), MaxNumSeqs: maxNumSeqs(cfg)})
		},
		Warmup: Warmup,
		Functional: func(ctx context.Context, url, model, apiKeyEnv string, c config.Config) *results.Functional {
			return functional.Run(ctx, functional.Options{URL: url, Model: model, APIKey: os.Getenv(apiKeyEnv),
				MaxModelLen: c.Engine.MaxModelLen, Timeout: c.Functional.Timeout.D()})
		},
		Judge:    judge.Judge,
		History:  hist.Prepare, // one store for the run: opened by the first, closed by Record
		Record:   hist.Record,
		Baseline: BaselineFromFile,
		Report:   WriteReports,
		ExitCode: judge.ExitCode,
		Catalog:  cat,
	}
	d.Discover = func(ctx context.Context, c config.Config) (Source, string, error) {
		src, name, f, err := discover(c, cat)
		fleet = f
		return src, name, err
	}
	d.Health = func(ctx context.Context, src Source, name string, c config.Config) *results.Health {
		o := health.FromConfig(c, name)
		o.Progress, o.Catalog = logFrom(ctx, progress), cat
		var bench health.BenchRunner
		switch name {
		case sourceSim:
			bench = health.SimBench{Fleet: fleet, Pace: c.Sim.BenchTime.D()}
			o.Links = health.SimLinks{Fleet: fleet, Pace: c.Sim.BenchTime.D()}
			o.DCGM = false // no dcgmi for virtual GPUs; said in the notes below
		case sourceNVML:
			if r, err := cuda.Open(); err != nil {
				bench = health.Unavailable{Err: err}
			} else {
				defer r.Close()
				bench = r
			}
			if p, err := cuda.OpenPeer(); err != nil {
				o.Links = health.UnavailableLinks{Err: err}
			} else {
				defer p.Close()
				p.NCCLLib = c.Health.NCCLLib
				o.Links = p
			}
		}
		h := health.Run(ctx, src, bench, o)
		judge.Health(h, judge.HealthRulesFrom(c)) // health measures, judge decides
		if name == sourceSim {
			h.Notes = append(h.Notes, "DCGM not run: the GPUs are the simulator's virtual GPUs")
			if p := c.Sim.BenchTime.D(); p > 0 {
				h.Notes = append(h.Notes, fmt.Sprintf("each simulated microbenchmark, peer copy and the all-reduce took %s (sim.bench_time): the schedule's wall time is real, the figures simulated", p))
			}
		}
		return h
	}
	switch kind := backendkind.Of(cfg.Backend); {
	case kind.Simulated:
		d.Backend = &Sim{fleet: func() *sim.Fleet { return fleet }, cat: cat}
	case !kind.DiscoversGPUs: // given a server: gpuvet starts no engine
		d.Backend = Endpoint{}
		if !cfg.Endpoint.Health {
			d.Discover = nil
		}
	default:
		d.Backend = Local{}
		d.CacheEnv = modelcache.CacheEnv
	}
	return d
}

// The GPU sources health.source names besides auto and an nvidia-smi XML file's path.
const (
	sourceSim  = "sim"
	sourceNVML = "nvml"
)

// cachedTokenizer finds model's tokenizer.json for the load generator: in the plan's model cache
// (model_cache.dir), else in the hub's default one. "" when there is none.
func cachedTokenizer(cfg config.Config, model string, progress io.Writer) string {
	dir, _ := modelcache.Dir(cfg.ModelCache, cfg.Engine.Kind)
	p, err := modelcache.Tokenizer(dir, model)
	if err != nil && progress != nil {
		fmt.Fprintf(progress, "model cache: %v (the server sizes prompts instead)\n", err)
	}
	return p
}

// discover opens the GPU source named by health.source: auto (the fleet for backend sim, else
// NVML), nvml, sim, or the path of a captured `nvidia-smi -q -x`.
func discover(c config.Config, cat *catalog.Catalog) (Source, string, *sim.Fleet, error) {
	s := c.Health.Source
	if s == "auto" {
		s = sourceNVML
		if backendkind.Of(c.Backend).Simulated {
			s = sourceSim
		}
	}
	switch s {
	case sourceSim:
		f, err := sim.NewFleet(simFleetConfig(c, cat))
		if err != nil {
			return nil, "", nil, fmt.Errorf("sim: %w", err)
		}
		return f, sourceSim, f, nil
	case sourceNVML:
		src, err := gpu.OpenNVML()
		if errors.Is(err, gpu.ErrNoDriver) {
			return nil, "", nil, fmt.Errorf("%w: %w; on a host without GPUs use --sim, or health.source=sim / a nvidia-smi XML file", ErrNoGPUSource, err)
		}
		if err != nil {
			return nil, "", nil, err
		}
		return src, sourceNVML, nil, nil
	}
	src, err := gpu.FromNvidiaSMIXML(s, cat)
	if err != nil {
		return nil, "", nil, err
	}
	return src, "nvidia-smi-xml", nil, nil
}

// WriteReports writes the reports the output settings ask for into dir (report.WriteDir), and the
// Prometheus textfile to output.prometheus_file too. Every backend writes through it.
func WriteReports(s *results.Summary, dir string, o config.Output) error {
	err := report.WriteDir(s, dir, o.HTML, o.JUnit, o.Prometheus)
	if o.PrometheusFile != "" {
		if perr := report.WritePrometheus(s, o.PrometheusFile); perr != nil {
			err = errors.Join(err, fmt.Errorf("output.prometheus_file: %w", perr))
		}
	}
	return err
}

// Sim serves every slot with an in-process simulator attached to the slot's virtual GPU, so the
// fleet's power, clocks and temperature follow the load (and a straggler GPU is slower).
type Sim struct {
	fleet func() *sim.Fleet
	cat   *catalog.Catalog // the fleet's catalog: the served model is looked up in it
}

func (*Sim) Name() string { return "sim" }

func (s *Sim) Serve(ctx context.Context, slot Slot, model string, cfg config.Config, _ string) (*Served, error) {
	f := s.fleet()
	if f == nil || len(slot.GPUs) == 0 {
		return nil, errors.New("sim backend: no virtual GPUs (discovery failed)")
	}
	start := time.Now()
	srv, err := sim.Listen(sim.Config{
		GPU: f.GPU().Key, Model: model, Seed: cfg.Sim.Seed + int64(slot.Index), Catalog: s.cat,
		Engine: sim.EngineConfig{TP: max(1, cfg.Engine.TP), MaxModelLen: cfg.Engine.MaxModelLen, GPUMemUtil: cfg.Engine.GPUMemoryUtilization,
			MaxNumSeqs: cfg.Sim.MaxNumSeqs, StepOverhead: cfg.Sim.StepOverhead.D(), SeqOverhead: cfg.Sim.SeqOverhead.D()},
		Fleet: f, GPUIndex: slot.GPUs[0], EngineFault: f.EngineFault(slot.GPUs[0]),
	}, "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sim: %w (the simulator serves catalog models: %s)", err, strings.Join(s.cat.ModelIDs(), ", "))
	}
	sv := &Served{URL: srv.URL(), Binding: "none: simulator (in-process)",
		Engine: results.EngineInfo{Kind: "sim", TP: max(1, cfg.Engine.TP)}, Stop: func() { srv.Close() },
		LogTail: func() string { return srv.LogTail(40) }, Exited: srv.ExitStatus,
		PID: os.Getpid()} // in-process: the simulator's goroutines run on gpuvet's own threads
	if st := srv.ExitStatus(); st != "" {
		return sv, fmt.Errorf("the engine exited before it was ready (%s)", st)
	}
	if err := probeReady(ctx, min(cfg.Engine.ReadyTimeout.D(), time.Minute), 100*time.Millisecond, sv.URL, model, ""); err != nil {
		return sv, fmt.Errorf("simulator not serving: %w", err)
	}
	sv.Provision = time.Since(start)
	return sv, nil
}

// EngineVersion is the simulator's; a simulated slow engine says so: it is not the engine whose
// healthy share of the roofline the judge knows (judge.HealthySOL).
func (*Sim) EngineVersion(_ context.Context, cfg config.Config) (string, error) {
	if cfg.Sim.StepOverhead > 0 || cfg.Sim.SeqOverhead > 0 {
		return fmt.Sprintf("gpuvet-sim (a slow engine: %s a step, %s a sequence)", cfg.Sim.StepOverhead.D(), cfg.Sim.SeqOverhead.D()), nil
	}
	return "gpuvet-sim", nil
}

// BaselineFromFile is the baseline step of `gpuvet run --baseline FILE`: the file is read here
// (any format the importer knows; an unreadable one becomes a note, not a failure) and judged.
func BaselineFromFile(s *results.Summary, path string, plan *config.Plan) error {
	base, note := importer.ReadBaseline(path)
	return judge.Baseline(s, base, note, path, plan)
}
