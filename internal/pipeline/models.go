package pipeline

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuvet/gpuvet/internal/backendkind"
	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/engine"
	"github.com/gpuvet/gpuvet/internal/enginekind"
	"github.com/gpuvet/gpuvet/internal/load"
	"github.com/gpuvet/gpuvet/internal/power"
	"github.com/gpuvet/gpuvet/internal/results"
)

// slotPlan is one slot with the configuration in force for its GPU (accelerator overrides applied).
type slotPlan struct {
	slot Slot
	cfg  config.Config
	acc  string // accelerators key used, "" none
}

func (r *run) slotPlans() ([]slotPlan, string) {
	slots, note := r.slots(max(1, r.cfg.Engine.TP))
	var out []slotPlan
	for _, s := range slots {
		c, _, acc := r.plan.ForGPU(s.GPUName)
		out = append(out, slotPlan{slot: s, cfg: c, acc: acc})
	}
	return out, note
}

// modelOrder is every model any slot serves, the base plan's first.
func modelOrder(base []string, sps []slotPlan) []string {
	out := slices.Clone(base)
	for _, sp := range sps {
		for _, m := range sp.cfg.Models {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

func (r *run) models(ctx context.Context) {
	if r.deps.Backend == nil {
		r.sum.Error = "no serving backend"
		return
	}
	sps, note := r.slotPlans()
	if note != "" {
		r.sum.Caveats = append(r.sum.Caveats, note)
	}
	if len(sps) == 0 {
		if r.host().Error == "" {
			r.host().Error = "no GPU to serve on"
		}
		r.host().Status = results.StatusFailed
		r.progress("serve: no GPU to serve on")
		return
	}
	for _, sp := range sps {
		if sp.acc != "" {
			r.sum.Caveats = append(r.sum.Caveats, fmt.Sprintf("gpu %v (%s): accelerator override %q applied", sp.slot.GPUs, sp.slot.GPUName, sp.acc))
		}
	}
	version, verr := "", error(nil)
	_ = protect(func() error { version, verr = r.deps.Backend.EngineVersion(ctx, r.cfg); return nil })
	r.sum.Meta.Engine = r.engineKind()
	r.sum.Meta.EngineVersion = version
	if verr != nil {
		r.sum.Caveats = append(r.sum.Caveats, "engine version unknown: "+verr.Error())
	} else if r.cfg.Engine.Version != "" && version != r.cfg.Engine.Version {
		r.sum.Flags = append(r.sum.Flags, results.Flag{Scope: "run", Subject: "engine", Check: "engine.version",
			Reason: fmt.Sprintf("engine reports version %s, the plan pins %s: install the pinned version or update engine.version", version, r.cfg.Engine.Version)})
	}
	order := modelOrder(r.cfg.Models, sps)
	units := 0
	for _, id := range order {
		units += len(serving(id, sps))
	}
	r.choose(ctx, sps)
	r.prog.SetPlan(units, r.stepsPerEndpoint())
	r.prog.SetRungTime(load.RungTime(r.cfg.LoadConfig()))
	for _, id := range order {
		if ctx.Err() != nil {
			r.notRun(id, sps)
			continue
		}
		r.model(ctx, id, sps, version)
	}
}

// notRun records a model the run never reached, with every slot it would have served as not run.
func (r *run) notRun(id string, sps []slotPlan) {
	m := results.Model{Model: id, Status: results.StatusNotRun, Engine: results.EngineInfo{Kind: r.engineKind()}}
	for _, sp := range serving(id, sps) {
		m.Endpoints = append(m.Endpoints, notRunEndpoint(sp.slot))
	}
	r.mu.Lock()
	r.host().Models = append(r.host().Models, m)
	r.mu.Unlock()
}

// serving is the slots whose plan serves model id.
func serving(id string, sps []slotPlan) (out []slotPlan) {
	for _, sp := range sps {
		if slices.Contains(sp.cfg.Models, id) {
			out = append(out, sp)
		}
	}
	return out
}

func notRunEndpoint(s Slot) results.Endpoint {
	return results.Endpoint{GPUs: s.GPUs, GPUName: s.GPUName, Status: results.StatusNotRun}
}

func (r *run) engineKind() string {
	if !backendkind.Of(r.cfg.Backend).Engines { // a simulated engine, or a server gpuvet did not start
		return r.cfg.Backend
	}
	return r.cfg.Engine.Kind
}

func (r *run) model(ctx context.Context, id string, sps []slotPlan, version string) {
	m := results.Model{Model: id, Status: results.StatusOK,
		Engine: results.EngineInfo{Kind: r.engineKind(), Version: version, TP: max(1, r.cfg.Engine.TP)}}
	if gap := enginekind.Get(m.Engine.Kind).APIGaps; gap != "" && r.cfg.Engine.Command == "" {
		m.Notes = append(m.Notes, gap)
	}
	mine := serving(id, sps)
	r.mu.Lock()
	r.host().Models = append(r.host().Models, m)
	mi := len(r.host().Models) - 1
	r.mu.Unlock()

	// The model cache is prepared once per model, before any engine starts.
	var env map[string]string
	if r.deps.CacheEnv != nil && backendkind.Of(r.cfg.Backend).ThisHost {
		err := protect(func() (err error) {
			env, err = r.deps.CacheEnv(ctx, id, r.cfg.Engine.Kind, r.cfg.ModelCache)
			return err
		})
		if err != nil {
			r.mu.Lock()
			r.host().Models[mi].Status = results.StatusFailed
			r.host().Models[mi].Error = "model cache: " + err.Error()
			r.mu.Unlock()
			r.progress("%s: model cache FAILED: %v", id, err)
			r.flushLogged()
			return
		}
	}

	sem := make(chan struct{}, max(1, r.cfg.Run.ParallelGPUs))
	var bs *blockSync // GPUs loaded all at once line up their synchronous blocks
	if len(mine) > 1 && int(r.cfg.Run.ParallelGPUs) >= len(mine) {
		bs = newBlockSync(len(mine))
		ctx = context.WithValue(ctx, blockKey, bs)
	}
	var wg sync.WaitGroup
	for _, sp := range mine {
		if ctx.Err() == nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			if bs != nil {
				bs.leave()
			}
			r.addEndpoint(mi, notRunEndpoint(sp.slot))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if bs != nil {
				defer bs.leave()
			}
			cfg := sp.cfg
			cfg.Engine.Env = map[string]string{}
			maps.Copy(cfg.Engine.Env, sp.cfg.Engine.Env)
			maps.Copy(cfg.Engine.Env, env)
			var ep results.Endpoint
			served := func(info results.EngineInfo) {
				r.mu.Lock()
				defer r.mu.Unlock()
				me := &r.host().Models[mi].Engine
				if me.Command == "" {
					me.Command = info.Command
				}
				if info.Kind != "" { // what served it (Kubernetes with Dynamo: dynamo-vllm)
					me.Kind = info.Kind
				}
			}
			unit := unitName(id, sp.slot.GPUs, len(r.cfg.Models))
			defer r.prog.Done(unit)
			ectx := r.withRungs(ctx, unit)
			if err := protect(func() error { r.endpoint(ectx, &ep, id, sp.slot, cfg, served); return nil }); err != nil {
				// What the endpoint measured before the panic stays: only its status and error change.
				ep.GPUs, ep.GPUName, ep.Status = sp.slot.GPUs, sp.slot.GPUName, results.StatusFailed
				ep.Error = strings.TrimPrefix(ep.Error+"; "+err.Error(), "; ")
			}
			r.addEndpoint(mi, ep)
			r.progress("%s %s: %s%s", id, onGPUs(sp.slot.GPUs), phaseWord(ep), errSuffix(ep.Error))
			r.flushLogged()
		}()
	}
	wg.Wait()
}

// addEndpoint adds ep to model mi's endpoints, kept in GPU order.
func (r *run) addEndpoint(mi int, ep results.Endpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := &r.host().Models[mi]
	m.Endpoints = append(m.Endpoints, ep)
	slices.SortFunc(m.Endpoints, func(a, b results.Endpoint) int { return firstGPU(a) - firstGPU(b) })
}

// onGPUs names an endpoint's GPUs on a progress line ("on gpu [0]"), or "at the endpoint".
func onGPUs(gpus []int) string {
	if len(gpus) == 0 {
		return "at the endpoint"
	}
	return fmt.Sprintf("on gpu %v", gpus)
}

// phaseWord is what the progress line says of an endpoint it just finished: what happened to the
// work, never a verdict (the judge has not spoken yet).
func phaseWord(ep results.Endpoint) string {
	switch {
	case ep.Status == results.StatusInterrupted || ep.Status == results.StatusNotRun:
		return string(ep.Status)
	case ep.Error != "" || ep.Status == results.StatusFailed:
		return "did not finish"
	}
	return "measured"
}

func firstGPU(e results.Endpoint) int {
	if len(e.GPUs) == 0 {
		return -1
	}
	return e.GPUs[0]
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": " + firstLines(e, 1)
}

func slug(s string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' {
			return c
		}
		return '_'
	}, s)
}

// gpuTag names a slot's files: "gpu0-1", or "endpoint" for one without GPUs of gpuvet's.
func gpuTag(gpus []int) string {
	if len(gpus) == 0 {
		return "endpoint"
	}
	return "gpu" + strings.Trim(strings.ReplaceAll(fmt.Sprint(gpus), " ", "-"), "[]")
}

// endpoint serves model on one slot and measures it: serve -> warm-up -> load + power -> functional.
// The engine is stopped before it returns, whatever happened. It fills *ep as it goes, so what was
// measured is there even when a later phase panics.
func (r *run) endpoint(ctx context.Context, ep *results.Endpoint, model string, slot Slot, cfg config.Config, served func(results.EngineInfo)) {
	*ep = results.Endpoint{GPUs: slot.GPUs, GPUName: slot.GPUName, Status: results.StatusOK}
	sw := newStopwatch()
	defer func() { ep.Timing = sw.result() }() // registered first, so the total includes the engine's stop
	sv, err := r.serve(ctx, ep, model, slot, cfg)
	sw.lap(&sw.t.ServeSeconds)
	if sv != nil && sv.Stop != nil {
		defer sv.Stop()
	}
	if err != nil {
		failEndpoint(ctx, ep, "serve", err)
		if sv != nil && sv.LogTail != nil {
			ep.LogTail = sv.LogTail()
		}
		return
	}
	ep.URL = results.RedactURLs(sv.URL) // recorded: never a URL's key
	ep.ProvisionSeconds = sv.Provision.Seconds()
	served(sv.Engine)
	err = r.warmup(ctx, sv, model, slot.Index)
	sw.lap(&sw.t.WarmupSeconds)
	if err != nil {
		failEndpoint(ctx, ep, "warmup", err)
		return
	}
	if ctx.Err() != nil {
		failEndpoint(ctx, ep, "load", ctx.Err())
		return
	}
	if r.measure(ctx, ep, sv, model, slot, cfg, sw) {
		r.apiSuite(ctx, ep, sv, model, slot, cfg, sw)
	}
}

// failEndpoint records a phase's failure after any earlier one; an interrupted run says so instead.
func failEndpoint(ctx context.Context, ep *results.Endpoint, phase string, err error) {
	ep.Status = results.StatusFailed
	msg := phase + ": " + err.Error()
	if d := results.DisruptionOf(err); d != "" { // not the GPU's: the judge makes it inconclusive
		ep.Status, ep.Disruption = results.StatusInconclusive, d
	}
	if l := results.LayerOfError(err); l != "" && ep.ErrorLayer == "" {
		ep.ErrorLayer = l // its maker knew whose it is (a backend's Job): the judge reads it
	}
	if ctx.Err() != nil {
		ep.Status = results.StatusInterrupted
		msg = phase + ": interrupted (" + context.Cause(ctx).Error() + ")" // "interrupt signal received"
	}
	ep.Error = strings.TrimPrefix(ep.Error+"; "+msg, "; ") // msg alone when it is the first
}

// serve notes what else is on the GPUs, then starts the engine; what it served is returned even
// when serving failed, so the caller can stop it and keep its log.
func (r *run) serve(ctx context.Context, ep *results.Endpoint, model string, slot Slot, cfg config.Config) (*Served, error) {
	if b := r.busyBefore(ctx, slot, cfg.Health.AllowBusy); b != nil {
		ep.Busy = append(ep.Busy, *b)
		r.progress("%s %s: %s", model, onGPUs(slot.GPUs), b.Reason)
	}
	r.progress("%s %s: serve", model, onGPUs(slot.GPUs))
	var sv *Served
	err := r.inject("serve", slot.Index)
	if err == nil {
		sv, err = r.deps.Backend.Serve(ctx, slot, model, cfg, r.out)
	}
	if sv != nil {
		ep.LogFile, ep.Binding = sv.LogFile, sv.Binding
	}
	return sv, err
}

// measure runs the load on the warm engine and records what it measured; it reports whether to go
// on (not when interrupted).
func (r *run) measure(ctx context.Context, ep *results.Endpoint, sv *Served, model string, slot Slot, cfg config.Config, sw *stopwatch) bool {
	rel := filepath.Join("raw", slug(model), gpuTag(slot.GPUs))
	unbind, lb := r.bindLoad(slot, cfg)
	if lb != "" {
		ep.Binding = strings.TrimPrefix(ep.Binding+"; load generator: "+lb, "; ")
	}
	ld, pw, tel, during, err := r.load(ctx, sv, model, slot, cfg, filepath.Join(r.out, rel+".records.jsonl"))
	unbind()
	sw.lap(&sw.t.LoadSeconds)
	ep.Load, ep.Power, ep.Telemetry = ld, pw, tel
	if during != nil {
		ep.Busy = append(ep.Busy, *during)
		r.progress("%s %s: %s", model, onGPUs(slot.GPUs), during.Reason)
	}
	batch, batchSrc := solBatch(maxNumSeqs(cfg))
	if tp := max(1, cfg.Engine.TP); len(slot.GPUs) > tp {
		// Several engines behind one endpoint (Dynamo's workers): the bound is one engine's.
		ep.SpeedOfLight = &results.SpeedOfLight{Note: fmt.Sprintf("speed-of-light: the endpoint serves from %d engines of tp=%d; the bound is one engine's", len(slot.GPUs)/tp, tp)}
	} else if sol, note := speedOfLight(r.deps.Catalog, slot.GPUName, model, cfg.Engine.TP, ld, batch, batchSrc); sol != nil {
		ep.SpeedOfLight = sol
	} else if note != "" {
		ep.SpeedOfLight = &results.SpeedOfLight{Note: note} // why there is no bound, for the report
	}
	if ld != nil {
		if werr := results.WriteJSON(filepath.Join(r.out, rel+".json"), ld); werr == nil {
			ep.RawLoadFile = rel + ".json"
		}
	}
	if sv.Exited != nil {
		ep.EngineExit = sv.Exited() // an engine that exited under load: the judge names the engine
	}
	r.recordLoadError(ctx, ep, sv, model, slot, ld, err)
	if ctx.Err() != nil {
		if ep.Status != results.StatusInterrupted {
			failEndpoint(ctx, ep, "load", ctx.Err())
		}
		return false
	}
	return true
}

// recordLoadError records a load that ended badly: the engine's doing, or the load's failure.
func (r *run) recordLoadError(ctx context.Context, ep *results.Endpoint, sv *Served, model string, slot Slot, ld *results.Load, err error) {
	switch {
	case err != nil && ep.EngineExit != "" && ld != nil && len(ld.Runs) > 0 && ctx.Err() == nil:
		// The engine died under load after rungs were measured: the judge names the engine
		// (judge.engine_fault), no failure of the GPU's.
		if ld.Error == "" {
			ld.Error = err.Error()
		}
		r.progress("%s %s: the engine exited during the load (%s): %v", model, onGPUs(slot.GPUs), ep.EngineExit, err)
	case err != nil:
		failEndpoint(ctx, ep, "load", err)
	}
	if (err != nil || ep.EngineExit != "" || loadErrored(ld)) && sv.LogTail != nil && ctx.Err() == nil {
		// The engine may have failed or died under load: keep its last words, which the judge reads
		// for a GPU error or a traceback (judge.Faults).
		ep.LogTail = sv.LogTail()
	}
}

// apiSuite runs the functional (API conformance) suite, unless the engine exited under the load.
func (r *run) apiSuite(ctx context.Context, ep *results.Endpoint, sv *Served, model string, slot Slot, cfg config.Config, sw *stopwatch) {
	switch {
	case !cfg.Functional.Enabled || r.deps.Functional == nil:
	case ep.EngineExit != "":
		r.progress("%s %s: functional suite skipped: the engine exited (%s)", model, onGPUs(slot.GPUs), ep.EngineExit)
	default:
		r.progress("%s %s: functional suite", model, onGPUs(slot.GPUs))
		if err := r.inject("functional", slot.Index); err != nil {
			ep.Functional = &results.Functional{Status: results.StatusFailed, Error: err.Error()}
		} else {
			ep.Functional = r.deps.Functional(ctx, sv.URL, model, sv.APIKeyEnv, cfg)
		}
		sw.lap(&sw.t.FunctionalSeconds)
	}
	if ep.Functional != nil { // a failed suite fails the endpoint; each failed test only flags it
		switch ep.Functional.Status {
		case results.StatusFailed:
			failEndpoint(ctx, ep, "functional", fmt.Errorf("%s", ep.Functional.Error))
		case results.StatusFlag:
			for _, t := range ep.Functional.Tests {
				if !t.Passed {
					ep.Flags = append(ep.Flags, results.Flag{Scope: "model", Subject: fmt.Sprintf("%s on %s", model, gpuTag(slot.GPUs)),
						Check: "functional." + t.Name, Reason: fmt.Sprintf("API conformance test %s failed: %s", t.Name, t.Detail)})
				}
			}
			ep.Status = results.Worse(ep.Status, results.StatusFlag)
		}
	}
}

// bindLoad pins the in-process load generator to the GPU's NUMA node's CPUs where it can and says
// what it did; the returned func undoes it.
func (r *run) bindLoad(slot Slot, cfg config.Config) (func(), string) {
	noop := func() {}
	switch {
	case !backendkind.Of(r.cfg.Backend).ThisHost:
		return noop, ""
	case !cfg.Engine.NUMABind:
		return noop, "not bound (engine.numa_bind=false)"
	case slot.NUMANode < 0:
		return noop, "not bound: the GPU's NUMA node is unknown"
	case r.cfg.Run.ParallelGPUs > 1:
		return noop, "not bound: several GPUs are loaded at once from one process"
	}
	restore, cpus, err := engine.BindProcessToNode(slot.NUMANode)
	if err != nil {
		return noop, "not bound: " + err.Error()
	}
	return restore, fmt.Sprintf("CPUs %s of NUMA node %d (sched_setaffinity; memory not bound)", cpus, slot.NUMANode)
}

// warmup warms the engine up before the load (Deps.Warmup; none when the backend's load does it).
func (r *run) warmup(ctx context.Context, sv *Served, model string, slot int) error {
	if err := r.inject("warmup", slot); err != nil {
		return err
	}
	if r.deps.Warmup == nil {
		return nil
	}
	return r.deps.Warmup(ctx, sv.URL, model, sv.APIKeyEnv)
}

// Warmup sends a few real completions so the load starts on a warm engine (compiled graphs,
// allocated KV cache). It needs 2 in at most 5 requests: an engine that fails some is measured (the
// load counts its errors), one that fails most does not serve.
func Warmup(ctx context.Context, url, model, apiKeyEnv string) error {
	const want, tries = 2, 5
	ok, errs := 0, []string(nil)
	for i := 0; i < tries && ok < want; i++ {
		if err := engine.Complete(ctx, url, model, os.Getenv(apiKeyEnv), "Write one sentence about GPUs.", 16, 2*time.Minute); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("warm-up request %d: %w", i+1, err)
			}
			errs = append(errs, fmt.Sprintf("request %d: %v", i+1, err))
			continue
		}
		ok++
	}
	if ok < want {
		return fmt.Errorf("warm-up: %d of %d requests completed (%d needed): %s", ok, tries, want, strings.Join(errs, "; "))
	}
	return nil
}

// load runs the profile (and, when aicr gates are set, the aicr concurrency run) with power sampling
// and the busy watch riding on it.
func (r *run) load(ctx context.Context, sv *Served, model string, slot Slot, cfg config.Config, records string) (*results.Load, *results.Power, *results.Telemetry, *results.Busy, error) {
	if err := r.inject("load", slot.Index); err != nil {
		return nil, nil, nil, nil, err
	}
	if r.deps.Load == nil {
		return nil, nil, nil, nil, fmt.Errorf("no load generator in this build")
	}
	// Before the sampling starts: an error here returns without stopping it.
	if err := os.MkdirAll(filepath.Dir(records), 0o755); err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, watch, stopSampling := r.sample(ctx, slot, cfg)
	cpu := watchCPU(ctx, sv)
	r.progress("%s %s: load (%s)", model, onGPUs(slot.GPUs), loadSizing(cfg.Load))
	lc := cfg.LoadConfig()
	ld, err := r.deps.Load(ctx, sv.URL, model, sv.APIKeyEnv, lc, records)
	if err == nil && ld != nil && (cfg.Gates.AICRMinOutputTokS != nil || cfg.Gates.AICRMaxTTFTP99Ms != nil) && lc.Profile != "concurrency" &&
		!hasRun(ld, "concurrency") && ctx.Err() == nil {
		// Not when the load brought one: a Kubernetes load Job runs the whole plan.
		err = r.aicrRun(ctx, sv, model, slot, config.AICRLoad(lc, cfg.Load.Concurrency), records, ld)
	}
	pw, tel := stopSampling(ld)
	cpu.stop(ld)
	if ld != nil && ctx.Err() != nil {
		ld.Interrupted = true
	}
	return ld, pw, tel, watch.result(ld), err
}

// stopSampling ends the sampling of one load and returns its power and telemetry records.
type stopSampling func(ld *results.Load) (*results.Power, *results.Telemetry)

// sample starts the power sampler, the busy watch riding on it and each GPU's own telemetry (every
// sample, error counters before and after); the context it returns marks the rungs.
func (r *run) sample(ctx context.Context, slot Slot, cfg config.Config) (context.Context, *busyWatch, stopSampling) {
	if u, ok := r.src.(Unsampled); ok && cfg.Power.Enabled { // no power record (nothing measured); the telemetry says why
		tel := &results.Telemetry{Source: r.srcName, IntervalSeconds: cfg.Power.Interval.D().Seconds(), Note: "not sampled: " + u.Unsampled()}
		return ctx, nil, func(*results.Load) (*results.Power, *results.Telemetry) { return nil, tel }
	}
	if !cfg.Power.Enabled || r.src == nil || len(slot.GPUs) == 0 {
		return ctx, nil, func(*results.Load) (*results.Power, *results.Telemetry) { return nil, nil }
	}
	src := r.src
	watch := newBusyWatch(src, slot.GPUs, cfg.Health.AllowBusy)
	if watch != nil {
		prev := rungFrom(ctx)
		ctx = context.WithValue(ctx, rungKey, func(i int, label string) {
			watch.rung(i)
			if prev != nil {
				prev(i, label)
			}
		})
	}
	rec, before := power.NewRecorder(slot.GPUs), power.ReadCounts(src, slot.GPUs)
	sampler := power.Start(ctx, cfg.Power.Interval.D(), func() (results.PowerSample, error) {
		if watch != nil {
			watch.check()
		}
		return sumSamples(src, slot.GPUs, rec)
	})
	return ctx, watch, func(ld *results.Load) (*results.Power, *results.Telemetry) {
		peak := 0.0
		if ld != nil {
			peak = ld.PeakOutputTokS
		}
		return sampler.Stop(peak), rec.Result(r.srcName, cfg.Power.Interval.D(), ld, before, power.ReadCounts(r.src, slot.GPUs))
	}
}

// aicrRun runs aicr's own fixed-concurrency load after the profile, which aicr gates judge; ld keeps its rung.
func (r *run) aicrRun(ctx context.Context, sv *Served, model string, slot Slot, c results.LoadConfig, records string, ld *results.Load) error {
	r.prog.Step(unitName(model, slot.GPUs, len(r.cfg.Models)), r.stepsPerEndpoint(), "aicr concurrency run")
	r.progress("%s %s: aicr concurrency run (%d in flight, %d requests of %d/%d tokens)", model, onGPUs(slot.GPUs),
		c.Concurrency, c.MaxRequests, c.PromptTokens, c.OutputTokens)
	cl, cerr := r.deps.Load(context.WithValue(context.WithValue(ctx, rungKey, nil), blockKey, nil), sv.URL, model, sv.APIKeyEnv, c, strings.TrimSuffix(records, ".records.jsonl")+".aicr.records.jsonl")
	if cl != nil {
		ld.Runs = append(ld.Runs, cl.Runs...)
	}
	if cerr != nil {
		return fmt.Errorf("aicr concurrency run: %w", cerr)
	}
	return nil
}

// hasRun reports whether the load holds a run of that kind.
func hasRun(ld *results.Load, kind string) bool {
	return slices.ContainsFunc(ld.Runs, func(r results.Run) bool { return r.Kind == kind })
}

// sumSamples reads every GPU of the slot once: the slot's power is their sum (clocks the lowest,
// temperature and utilisation the highest); rec, when set, keeps each GPU's own sample.
func sumSamples(src Source, gpus []int, rec *power.Recorder) (results.PowerSample, error) {
	var out results.PowerSample
	for i, g := range gpus {
		s, err := src.Sample(g)
		if err != nil {
			return out, err
		}
		if rec != nil {
			rec.Add(g, s, time.Now())
		}
		out.PowerW += s.PowerW
		if i == 0 || s.SMClockMHz < out.SMClockMHz {
			out.SMClockMHz = s.SMClockMHz
		}
		out.TempC = max(out.TempC, s.TempC)
		out.ClockReasons |= s.ClockReasons
		out.UtilPct = max(out.UtilPct, s.UtilPct)
	}
	return out, nil
}

// loadErrored reports whether any request of the load failed.
func loadErrored(l *results.Load) bool {
	return l != nil && slices.ContainsFunc(l.Runs, func(r results.Run) bool { return r.Requests.Errored > 0 })
}

// loadSizing says, for the progress line, how the load's rungs are sized: a sweep's by what the
// earlier rungs measured, within load.time_budget; any other profile's by its one duration.
func loadSizing(l config.LoadProfile) string {
	if l.Profile == "sweep" {
		return fmt.Sprintf("sweep: each rung sized by what the earlier ones measured, at least %s, within load.time_budget %s", l.MaxDuration, l.TimeBudget)
	}
	return fmt.Sprintf("%s, %s", l.Profile, l.MaxDuration)
}
