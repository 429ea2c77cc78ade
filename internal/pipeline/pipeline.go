// Package pipeline is `gpuvet run` on one host: discover -> health -> for each model, for each GPU
// (or tp group): cache -> serve -> warm-up -> load + power -> functional -> stop; then judge ->
// write. A GPU, model or phase that fails is recorded with its error and the run goes on;
// summary.json is rewritten atomically as each GPU finishes (complete=false until the end), so a
// killed run keeps what it measured.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/modelcache"
	"github.com/gpuvet/gpuvet/internal/results"
	"github.com/gpuvet/gpuvet/internal/term"
)

// Options are the run-level inputs that are not configuration.
type Options struct {
	ToolVersion string
	Host        string // host name recorded; default os.Hostname()
	// Progress receives the run's progress (nil: silent): plain lines, or a live line when Live
	// (a terminal): "gpu 2/4", "rung 3/6", elapsed and time left.
	Progress io.Writer
	Live     bool
}

// Result is what a run leaves: the summary and where it was written.
type Result struct {
	Summary     *results.Summary
	SummaryPath string
	ExitCode    int
}

// run is the state of one run.
type run struct {
	plan *config.Plan
	cfg  config.Config
	deps Deps
	opt  Options
	out  string

	prog    *term.Progress // nil: silent
	mu      sync.Mutex     // guards sum while phases write into it and it is flushed
	sum     *results.Summary
	src     Source
	srcName string
	// unwritten is the error of the final summary.json write (nil: written): the run exits 1.
	unwritten error
}

// errInjected marks failures injected by --fail-in.
var errInjected = errors.New("injected failure")

func (r *run) progress(format string, args ...any) { r.prog.Logf(format, args...) }

// inject returns an injected error when --fail-in names phase (per GPU: on the first slot only, so
// the run shows the others go on).
func (r *run) inject(phase string, slot int) error {
	if r.cfg.Run.FailIn == phase && slot <= 0 {
		return fmt.Errorf("%w (--fail-in %s)", errInjected, phase)
	}
	return nil
}

// Run executes the whole validation. It returns an error only when nothing could be written.
func Run(ctx context.Context, plan *config.Plan, deps Deps, opt Options) (*Result, error) {
	cfg := plan.Config
	r := &run{plan: plan, cfg: cfg, deps: deps, opt: opt, out: cfg.Output.Dir}
	if opt.Progress != nil {
		r.prog = term.NewProgress(opt.Progress, 0, 1, opt.Live)
		defer r.prog.Finish()
		ctx = context.WithValue(ctx, logKey, r.prog.Writer(RungLine))
	}
	if err := os.MkdirAll(r.out, 0o755); err != nil {
		return nil, fmt.Errorf("output directory %s: %w", r.out, err)
	}
	r.sum = r.newSummary()
	if err := r.flush(); err != nil {
		return nil, fmt.Errorf("cannot write %s: %w (check --out)", r.summaryPath(), err)
	}
	r.progress("run %s: backend %s, out %s", r.sum.RunID, cfg.Backend, r.out)

	r.timed("discover", func() { r.discover(ctx) })
	if r.src != nil {
		defer r.src.Close()
	}
	r.timed("health", func() { r.health(ctx) })
	r.flushLogged()
	r.timed("models", func() { r.models(ctx) })
	r.timed("baseline", func() { r.baseline(ctx) })
	r.history(ctx, r.deps.History, "read")
	r.timed("judge", r.judge)
	r.finish(ctx)
	return &Result{Summary: r.sum, SummaryPath: r.summaryPath(), ExitCode: r.exitCode()}, nil
}

func (r *run) host() *results.Host { return &r.sum.Hosts[0] }

func (r *run) newSummary() *results.Summary {
	host := r.opt.Host
	if host == "" {
		host, _ = os.Hostname()
	}
	now := time.Now().UTC()
	s := NewSummary(r.plan, results.NewRunID(now), now, r.opt.ToolVersion)
	s.Hosts = []results.Host{{Name: host}}
	// Until finish rewrites it, the file on disk belongs to a run that has not finished.
	s.Status = results.StatusIncomplete
	s.Timing = &results.Timing{}
	s.Caveats = append(s.Caveats, r.plan.Notes...)
	if backendkind.Of(r.cfg.Backend).ThisHost {
		if _, note := modelcache.Dir(r.cfg.ModelCache, r.cfg.Engine.Kind); note != "" {
			s.Caveats = append(s.Caveats, note)
		}
	}
	if r.cfg.Run.FailIn != "" {
		s.Caveats = append(s.Caveats, "a failure is injected in phase "+r.cfg.Run.FailIn+" (--fail-in): this run tests gpuvet, not the host")
	}
	if strings.HasPrefix(r.plan.Source("load.max_duration"), "default(sim)") {
		l := r.cfg.Load
		s.Caveats = append(s.Caveats, fmt.Sprintf("simulator quick profile: %d/%d prompt/output tokens, %s per rate, %d rates, "+
			"max concurrency %d, an engine batch of %d (sim.max_num_seqs) (the simulator's shorter defaults: set load.prompt_tokens, load.output_tokens, load.max_duration, load.rates and load.max_concurrency for the full default profile, and sim.max_num_seqs for a larger batch)", l.PromptTokens, l.OutputTokens, l.MaxDuration, l.Rates, l.MaxConcurrency, r.cfg.Sim.MaxNumSeqs))
	}
	return s
}

// protect runs fn and turns a panic into an error, so one broken phase never ends the run.
func protect(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, firstLines(string(debug.Stack()), 12))
		}
	}()
	return fn()
}

func firstLines(s string, n int) string {
	l := strings.SplitN(s, "\n", n+1)
	if len(l) > n {
		l = l[:n]
	}
	return strings.Join(l, "\n")
}

func (r *run) discover(ctx context.Context) {
	d := &r.host().Discovery
	err := protect(func() error {
		if r.deps.Discover == nil {
			return nil
		}
		if err := r.inject("discover", 0); err != nil {
			return err
		}
		src, name, err := r.deps.Discover(ctx, r.cfg)
		if err != nil {
			return err
		}
		r.src, r.srcName = src, name
		if src == nil {
			return nil
		}
		gpus, err := src.GPUs()
		if err != nil {
			return fmt.Errorf("GPU inventory from %s: %w", name, err)
		}
		d.GPUs = gpus
		return nil
	})
	if err != nil {
		d.Error = err.Error()
		r.host().Error = "discovery failed: " + err.Error()
		r.host().Status = results.StatusFailed
		r.progress("discover: FAILED: %v", err)
		return
	}
	if r.src == nil {
		d.Note = "no GPU discovery for this backend"
		return
	}
	d.Source = r.srcName
	if n, ok := r.src.(Described); ok {
		d.Note = n.Note()
	}
	if len(d.GPUs) > 0 {
		r.sum.Meta.DriverVersion = d.GPUs[0].DriverVersion
		r.sum.Meta.CUDAVersion = d.GPUs[0].CUDAVersion
	}
	names := map[string]int{}
	for _, g := range d.GPUs {
		names[g.Name]++
	}
	var parts []string
	for n, c := range names {
		parts = append(parts, fmt.Sprintf("%d× %s", c, n))
	}
	slices.Sort(parts)
	r.progress("discover: %s via %s", strings.Join(parts, ", "), d.Source)
}

func (r *run) health(ctx context.Context) {
	finds := backendkind.Of(r.cfg.Backend).DiscoversGPUs
	if !r.cfg.Health.Enabled || (!finds && !r.cfg.Endpoint.Health) {
		return
	}
	if r.src == nil || r.deps.Health == nil {
		if finds {
			r.host().Health = &results.Health{Status: results.StatusFailed, Error: "health phase could not run: no GPU source"}
		}
		return
	}
	r.progress("health: %d GPUs", len(r.host().Discovery.GPUs))
	var h *results.Health
	err := protect(func() error {
		if err := r.inject("health", 0); err != nil {
			return err
		}
		h = r.deps.Health(ctx, r.src, r.srcName, r.cfg)
		if h == nil {
			return errors.New("health phase returned nothing")
		}
		return nil
	})
	if err != nil {
		h = &results.Health{Source: r.srcName, Status: results.StatusFailed, Error: err.Error()}
	}
	r.mu.Lock()
	r.host().Health = h
	r.mu.Unlock()
	r.progress("health: %s", h.Status)
}

// slots groups the selected GPUs into engines: TPSlots, unless the backend is a Grouper.
func (r *run) slots(tp int) ([]Slot, string) {
	gpus := r.host().Discovery.GPUs
	if r.cfg.Run.GPUCount > 0 && r.cfg.Run.GPUCount < len(gpus) {
		gpus = gpus[:r.cfg.Run.GPUCount]
	}
	if g, ok := r.deps.Backend.(Grouper); ok {
		return g.Group(gpus, tp)
	}
	return TPSlots(gpus, tp)
}

// TPSlots is one slot per tp consecutive GPUs, and a note on the GPUs left over.
func TPSlots(gpus []results.GPUInfo, tp int) ([]Slot, string) {
	tp = max(1, tp)
	var out []Slot
	note := ""
	for i := 0; i+tp <= len(gpus); i += tp {
		s := Slot{Index: len(out), GPUName: gpus[i].Name, NUMANode: gpus[i].NUMANode}
		for _, g := range gpus[i : i+tp] {
			s.GPUs = append(s.GPUs, g.Index)
		}
		out = append(out, s)
	}
	if rest := len(gpus) % tp; rest != 0 {
		note = fmt.Sprintf("%d GPU(s) left over: %d GPUs do not divide into groups of tp=%d", rest, len(gpus), tp)
	}
	return out, note
}
