package k8s

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuvet/gpuvet/internal/config"
	"github.com/gpuvet/gpuvet/internal/inpod"
	"github.com/gpuvet/gpuvet/internal/pipeline"
	"github.com/gpuvet/gpuvet/internal/results"
)

// A Kubernetes node runs the host pipeline (pipeline.Run) with phases that act through the API:
// discovery reads the node object, health runs the health Job, serve one engine pod per slot (or
// one DynamoGraphDeployment), load the load Job (`gpuvet run --backend endpoint` on the node).
//
// gpuvet does not reach the pods (on a real node they sit on a bridge private to the cluster), so
// every HTTP request goes from a Job on the node: the load Job warms its engine up, runs the plan's
// load and the functional suite, and the pipeline takes both from its result. GPU telemetry only
// the node can read: the health Job checks it there.

// noTelemetry is why a node's GPUs are not sampled during its loads.
const noTelemetry = "no GPU telemetry from outside the node (power, clocks and the busy watch read the GPUs, which only the node can; the health Job checks them there)"

// nodeSource is a node's GPUs as the API shows them: a count and a product name, no telemetry.
type nodeSource struct {
	gpus []results.GPUInfo
	note string
}

func (s *nodeSource) GPUs() ([]results.GPUInfo, error) { return s.gpus, nil }
func (s *nodeSource) Sample(int) (results.PowerSample, error) {
	return results.PowerSample{}, errors.New(noTelemetry)
}
func (s *nodeSource) Close() error      { return nil }
func (s *nodeSource) Note() string      { return s.note }
func (s *nodeSource) Unsampled() string { return noTelemetry }

// source is the node's GPUs: as many as it has free, named by its product label.
func (h *nodeHost) source() *nodeSource {
	gpus := make([]results.GPUInfo, h.node.Free)
	// GPU feature discovery writes the nvidia-smi name with dashes for spaces ("NVIDIA-H200"); the
	// reference table and the accelerator overrides key on the nvidia-smi name.
	name := cmp.Or(strings.ReplaceAll(h.node.Product, "-", " "), string(GPUResource))
	for i := range gpus {
		gpus[i] = results.GPUInfo{Index: i, Name: name, UUID: fmt.Sprintf("%s/gpu-%d", h.node.Name, i), NUMANode: -1}
	}
	return &nodeSource{gpus: gpus, note: fmt.Sprintf("%d of %d allocatable nvidia.com/gpu free; product label %q; %s; %s",
		h.node.Free, h.node.Allocatable, h.node.Product, h.r.cacheNote, noTelemetry)}
}

// Run runs the host pipeline for the node and returns its summary. Its error, which fails the node
// in the fleet's record, is a model no engine could serve.
func (h *nodeHost) Run(ctx context.Context) (*results.Summary, error) {
	r := h.r
	dir := filepath.Join("hosts", h.node.Name) // the node's own results, under the run's folder
	plan := *r.plan
	plan.Config.Output.Dir = filepath.Join(r.out, dir)
	// The fleet compares with the baseline and writes the reports once, for every node.
	plan.Config.Run.Baseline, plan.Config.Run.SaveBaseline = "", false
	if plan.Config.Run.ParallelGPUs.Auto() && h.node.CPU <= 0 {
		plan.Config.Run.ParallelGPUs = 1
		plan.Notes = append(slices.Clone(plan.Notes), "run.parallel_gpus auto: one engine at a time on node "+h.node.Name+
			" (it advertises no allocatable CPU, where its load Jobs would run): set run.parallel_gpus to load more at once")
	}
	np := &nodePipeline{h: h, jobs: map[string]*nodeServed{}}
	deps := pipeline.NewDeps(plan.Config, nil, nil) // the host pipeline's judge, exit code and catalog
	// The fleet's merge reads and records the history once for every node (fleet.Execute).
	deps.History, deps.Record = nil, nil
	// run.parallel_gpus auto weighs the load clients' CPU need against the node's (pipeline.ChooseParallel).
	deps.Cores = func() (float64, string) {
		return h.node.CPU, fmt.Sprintf("node %s allocatable cpu %g, where its load Jobs run", h.node.Name, h.node.CPU)
	}
	deps.Discover = func(context.Context, config.Config) (pipeline.Source, string, error) {
		return h.source(), "kubernetes", nil
	}
	deps.Health = func(ctx context.Context, _ pipeline.Source, _ string, cfg config.Config) *results.Health {
		return h.runHealth(ctx, cfg)
	}
	deps.Backend = np
	if r.opt.Dynamo {
		deps.Backend = dynamoBackend{np}
	}
	deps.Load, deps.Functional, deps.Warmup = np.load, np.functional, nil
	deps.CacheEnv, deps.Baseline, deps.Report = nil, nil, nil
	res, err := pipeline.Run(ctx, &plan, deps, pipeline.Options{Host: h.node.Name, Progress: sayWriter(h.say)})
	if err != nil {
		return nil, err
	}
	s := res.Summary
	np.engineVersion(s)
	for mi := range s.Hosts[0].Models {
		for ei := range s.Hosts[0].Models[mi].Endpoints {
			if ep := &s.Hosts[0].Models[mi].Endpoints[ei]; ep.RawLoadFile != "" {
				ep.RawLoadFile = filepath.Join(dir, ep.RawLoadFile) // relative to the merged summary's folder
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return s, err
	}
	return s, unserved(s.Hosts[0])
}

// unserved is the error of a host with a model no engine served, naming the first reason.
func unserved(h results.Host) error {
	var errs []string
	for _, m := range h.Models {
		served, why := false, m.Error
		for _, e := range m.Endpoints {
			served, why = served || e.URL != "", cmp.Or(why, e.Error)
		}
		if !served && why != "" {
			errs = append(errs, fmt.Sprintf("%s: no engine served: %s", m.Model, why))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}

// sayWriter forwards the pipeline's progress lines to the fleet's, without the pipeline's own clock.
type sayWriter func(format string, a ...any)

var clockPrefix = regexp.MustCompile(`^\[\s*[0-9.]+s\] `)

func (w sayWriter) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if l = clockPrefix.ReplaceAllString(l, ""); l != "" {
			w("%s", l)
		}
	}
	return len(b), nil
}

var _ io.Writer = sayWriter(nil)

// nodePipeline is the node's serving backend (engine pods) and load phase (load Jobs); each served
// endpoint is remembered by its URL, for its load Job and for the functional phase.
type nodePipeline struct {
	h       *nodeHost
	mu      sync.Mutex
	jobs    map[string]*nodeServed
	version string // the engine version the first load Job read from its engine
}

// nodeServed is one served endpoint: its load Job's name, what it loads, the plan the Job runs
// (loadPlan) with its load profile (a Dynamo frontend's scaled to its GPUs), and the Job's result.
type nodeServed struct {
	job, what, plan string
	profile         results.LoadConfig
	result          *results.Endpoint
	ran             bool
}

func (np *nodePipeline) remember(url string, s *nodeServed) {
	np.mu.Lock()
	defer np.mu.Unlock()
	np.jobs[url] = s
}

func (np *nodePipeline) served(url string) *nodeServed {
	np.mu.Lock()
	defer np.mu.Unlock()
	return np.jobs[url]
}

func (np *nodePipeline) Name() string { return "kubernetes" }

// errVersion is why the engine version is not known before the engines start.
var errVersion = errors.New("not known before the engines start on the node: each load Job reads it from its engine")

// EngineVersion is read by the load Jobs from their engines (engineVersion records it).
func (np *nodePipeline) EngineVersion(context.Context, config.Config) (string, error) {
	return "", errVersion
}

// engineVersion records what the load Jobs read, in place of the pipeline's "unknown" caveat.
func (np *nodePipeline) engineVersion(s *results.Summary) {
	np.mu.Lock()
	v := np.version
	np.mu.Unlock()
	if v == "" {
		return
	}
	s.Meta.EngineVersion = v
	s.Caveats = slices.DeleteFunc(s.Caveats, func(c string) bool { return c == "engine version unknown: "+errVersion.Error() })
}

// modelIndex numbers a model for object names: its place among the plan's models, then an
// accelerator's own.
func (r *Run) modelIndex(model string) int {
	if i := slices.Index(r.plan.Config.Models, model); i >= 0 {
		return i
	}
	r.extraMu.Lock()
	defer r.extraMu.Unlock()
	i := slices.Index(r.extraModels, model)
	if i < 0 {
		r.extraModels = append(r.extraModels, model)
		i = len(r.extraModels) - 1
	}
	return len(r.plan.Config.Models) + i
}

// engineImage is the engine image for cfg: --engine-image, gpuvet's own for `gpuvet sim` as the
// engine, else the kind's default at engine.version.
func (r *Run) engineImage(cfg config.Config) (string, error) {
	if r.opt.EngineImage != "" {
		return r.opt.EngineImage, nil
	}
	if w := strings.Fields(cfg.Engine.Command); len(w) > 0 && w[0] == "gpuvet" {
		return r.opt.Image, nil
	}
	return DefaultEngineImage(cfg.Engine.Kind, cfg.Engine.Version)
}

// Serve creates the slot's engine pod and waits until it is Ready (the real completion is its load
// Job's first step). Stop deletes the pod and waits until it is gone (its GPUs free).
func (np *nodePipeline) Serve(ctx context.Context, slot pipeline.Slot, model string, cfg config.Config, _ string) (*pipeline.Served, error) {
	h := np.h
	r := h.r
	img, err := r.engineImage(cfg)
	if err != nil {
		return nil, err
	}
	tp := max(1, cfg.Engine.TP)
	idx, mi, si := strconv.Itoa(h.index), strconv.Itoa(r.modelIndex(model)), strconv.Itoa(slot.Index)
	es := EngineSpec{Kind: cfg.Engine.Kind, Command: cfg.Engine.Command, Image: img, ExtraArgs: cfg.Engine.ExtraArgs,
		Model: model, TP: tp, MaxModelLen: cfg.Engine.MaxModelLen, GPUMemoryUtilization: cfg.Engine.GPUMemoryUtilization,
		Env: cfg.Engine.Env, CachePVC: h.pvc}
	name := r.podName("engine", idx, mi, si)
	pod, err := enginePod(r.opt.RunID, name, h.node.Name, slot.Index, es, r.opt.Selection.Tolerations)
	if err != nil {
		return nil, err
	}
	pod.Spec.PriorityClassName = r.opt.PriorityClass
	cs, ns := r.cl.Client, r.podNS()
	if err := h.record("Pod", ns, name); err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating engine pod %s: %w", name, err)
	}
	load := dnsName("load", idx, mi, si)
	sv := &pipeline.Served{
		Engine:  results.EngineInfo{Kind: cfg.Engine.Kind, Command: strings.Join(pod.Spec.Containers[0].Command, " "), TP: tp},
		Binding: loadBinding("engine pod "+name, load, h.node.Name),
		Stop:    func() { h.deletePods(context.WithoutCancel(ctx), []string{name}) },
	}
	h.say("%s: engine pod %s on gpu %v (%s), waiting for Ready", model, name, slot.GPUs, img)
	if err := WaitPodsReady(ctx, cs, ns, []string{name}, cfg.Engine.ReadyTimeout.D(), h.r.opt.StartGrace); err != nil {
		return sv, fmt.Errorf("engine not ready: %w", err) // a preemption stays one (results.Disrupted)
	}
	urls, err := h.podURLs(ctx, []string{name})
	if err != nil {
		return sv, fmt.Errorf("engine not ready: %w", err)
	}
	// The real completion is the load Job's first step (its endpoint run serves by one): a Job of
	// its own per engine was 8 of the 18 Jobs a node cost the control plane (docs/k8s-scale.md).
	plan, err := r.loadPlan(cfg)
	if err != nil {
		return sv, err
	}
	sv.URL, sv.Provision = urls[0], time.Since(start)
	np.remember(sv.URL, &nodeServed{job: load, what: "engine pod " + name, plan: plan, profile: cfg.LoadConfig()})
	h.say("%s: engine pod %s Ready in %.1fs; load (its Job checks a real completion first)", model, name, sv.Provision.Seconds())
	return sv, nil
}

// loadPlan is the load Job's plan: the node's (nodePlan) with the slot's load profile from cfg (the
// Job's endpoint run knows no GPU, so an accelerators entry would not reach it otherwise), without
// health (the health Job's) or history (the fleet's merge records it); its engine is a pod of the
// Job's node (endpoint.same_host).
func (r *Run) loadPlan(cfg config.Config) (string, error) {
	s := settingsOf(cfg)
	s.Health.Enabled, s.History, s.SameHost = false, false, true
	plan, err := r.nodePlan(s)
	if err != nil {
		return "", fmt.Errorf("the load Job's plan for this GPU: %w", err)
	}
	return plan, nil
}

// loadBinding says where the endpoint ran and where its load came from.
func loadBinding(what, job, node string) string {
	return "kubernetes: " + what + ", load job " + job + " on node " + node +
		" (its warm-up, load and functional suite run from that Job: gpuvet does not reach the pods from outside the cluster)"
}

// load runs the endpoint's load Job on the node and returns its load. The Job runs the plan's whole
// load (aicr's concurrency run included) and functional suite: lc must be that plan's profile (any
// other is an error, never a load silently other than the one asked).
func (np *nodePipeline) load(ctx context.Context, url, model, _ string, lc results.LoadConfig, _ string) (*results.Load, error) {
	h := np.h
	r := h.r
	sv := np.served(url)
	if sv == nil {
		return nil, fmt.Errorf("no engine served at %s on node %s", url, h.node.Name)
	}
	np.mu.Lock()
	again := sv.ran
	sv.ran = true
	np.mu.Unlock()
	if again { // the pipeline asks once more only for aicr's run, which the Job's result would hold
		return nil, fmt.Errorf("load job %s ran already, and its result holds no concurrency run", sv.job)
	}
	if !reflect.DeepEqual(lc, sv.profile) {
		return nil, fmt.Errorf("the load Job on node %s runs its plan's load profile (%s), not the one asked (%s): a Kubernetes node loads each GPU once, with the plan's profile",
			h.node.Name, sv.profile.Profile, lc.Profile)
	}
	b, err := h.runJob(ctx, r.ns, h.loadJob(sv, url, model))
	if b == nil {
		return nil, results.InLayer(results.LayerInfra, fmt.Errorf("load job against %s: %w", sv.what, err))
	}
	s, perr := results.Parse(b)
	if perr != nil || len(s.Hosts) == 0 || len(s.Hosts[0].Models) == 0 || len(s.Hosts[0].Models[0].Endpoints) == 0 {
		return nil, results.InLayer(results.LayerInfra, fmt.Errorf("load job against %s: no endpoint result (%w)", sv.what, perr))
	}
	got := s.Hosts[0].Models[0].Endpoints[0]
	np.mu.Lock()
	sv.result = &got
	np.version = cmp.Or(np.version, s.Meta.EngineVersion)
	np.mu.Unlock()
	if results.DisruptionOf(err) != "" { // its pod stopped from outside: that is the story, not the GPU's
		return got.Load, err
	}
	// The Job's functional failures are the functional phase's; its serve failure is the engine's.
	var errs []string
	for _, e := range strings.Split(got.Error, "; ") {
		if why, ok := strings.CutPrefix(e, "serve: "); ok {
			return nil, results.InLayer(results.LayerEngine, fmt.Errorf("%s Ready, but a real completion failed (load job %s): %s", sv.what, sv.job, why))
		}
		if e != "" && !strings.HasPrefix(e, "functional: ") {
			errs = append(errs, e)
		}
	}
	if err != nil {
		errs = append(errs, err.Error())
	}
	if got.Load == nil && len(errs) == 0 {
		errs = append(errs, "load job "+sv.job+": no load in its result")
	}
	if len(errs) > 0 {
		return got.Load, errors.New(strings.Join(errs, "; "))
	}
	return got.Load, nil
}

// loadJob is the endpoint's load Job: `gpuvet run --backend endpoint` against url with its plan.
func (h *nodeHost) loadJob(sv *nodeServed, url, model string) *batchv1.Job {
	r := h.r
	const out = "out" // relative: in-pod's fresh working directory
	args := inpod.Command(sv.plan, out+"/summary.json", "run", "--backend", "endpoint", "--url", url, "--model", model, "--out", out)
	return gpuvetJob(r.opt.RunID, sv.job, RoleLoad, h.node.Name, r.opt.Image, args, 0, r.opt.Selection.Tolerations)
}

// functional is the functional suite the endpoint's load Job ran from the node (nil: none ran).
func (np *nodePipeline) functional(_ context.Context, url, _, _ string, _ config.Config) *results.Functional {
	sv := np.served(url)
	if sv == nil {
		return nil
	}
	np.mu.Lock()
	defer np.mu.Unlock()
	if sv.result == nil {
		return nil
	}
	return sv.result.Functional
}
